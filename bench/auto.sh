#!/bin/bash
# auto.sh - is `goccl perf --algo auto` within 10 % of the best fixed algorithm at every
# size of the 8 B..128 MiB sweep at 2, 3 and 4 ranks (issue 10)? One sweep cannot say:
# two reports of the same algorithm in one launch differ by 10-40 % on this VM, and the
# first report of a process runs slow. So every round runs, per rank count, the sweep
# for auto and every fixed algorithm in one launch, the algorithms taking turns within
# each size (below), in an order that changes with the round; the summary takes medians
# over rounds (several runs' TSVs can be pooled: bench/auto.py A/auto.tsv B/auto.tsv).
#
#     bash bench/auto.sh [OUTDIR] [ROUNDS] [RANKS...]   # from a clean clone; ~3 min per round (tcp ~5.5)
#
# With TUNE=1 it first calibrates per rank count (`goccl tune --np N --transport shm`, to
# OUTDIR/tune-N.json, unless TUNE_DIR names a folder that has them) and runs every sweep
# with GOCCL_TUNE_FILE set to it, which only auto reads (its cost model and the staged
# range); the fixed algorithms run as without. FIRST_ROUND (default 1) numbers the rounds
# from there, which sets their order: runs with and without TUNE interleaved round by
# round compare the two in the same hour (BENCHMARKS.md, "Speed", 20):
#
#     for r in 1 2 3 4; do FIRST_ROUND=$r bash bench/auto.sh D/plain-$r 1
#       TUNE=1 TUNE_DIR=D/tune FIRST_ROUND=$r bash bench/auto.sh D/tuned-$r 1; done
#
# GOCCL_ALGO_TUNE=online in the environment reaches every launch, and so auto's online
# choice of the AllReduce algorithm (README, Algorithms); the fixed algorithms ignore it.
# Interleaved with runs without it, round by round, it compares the two (BENCHMARKS.md,
# "Speed", 46):
#
#     for r in 1 2 3; do FIRST_ROUND=$r bash bench/auto.sh D/model-$r 1 2 3 4
#       GOCCL_ALGO_TUNE=online FIRST_ROUND=$r bash bench/auto.sh D/online-$r 1 2 3 4; done
#
# COLL=all_gather, reduce_scatter, broadcast or reduce sweeps that collective instead of
# all_reduce, against the fixed algorithms that implement it (ring, rd, naive and staged for
# all_gather and reduce_scatter; ring, tree, naive and staged for broadcast; ring, tree
# and naive for reduce); TUNE applies to all_reduce only.
#
# TRANSPORT=tcp (or any name `goccl perf --transport` takes) sweeps that transport
# instead of the default (shm for local ranks); staged, which only shm's links carry,
# is left out of the fixed algorithms there.
#
# Every launch times the algorithms in turns (`goccl perf --interleave`): each size in
# blocks of a few calls per algorithm, the algorithms taking turns block by block, each
# row its algorithm's median block, so that the VM's drift between one report and the
# next does not count as a difference between algorithms (BENCHMARKS.md, "Speed", 49).
# INTERLEAVE=0 times one algorithm's whole sweep after another's instead, after a
# warm-up report that is thrown away (every run before "Speed", 49).
#
# Writes OUTDIR/auto.tsv (ranks, bytes, algorithm, round, out-of-place us, the algorithm
# auto ran) and OUTDIR/host.txt (bench/host.sh), and prints OUTDIR/auto.md
# (bench/auto.py). Run nothing else meanwhile. DAMON=off (root) stops the kernel's DAMON
# monitor for the run and restarts it at exit: on the development VM it took 4-12 % of a
# core in bursts while the sweeps ran (BENCHMARKS.md, "Speed", 28).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/auto-$(date -u +%Y%m%dT%H%M%SZ)}
ROUNDS=${2:-5}
shift $(($# < 2 ? $# : 2))
RANKS=("$@")
((${#RANKS[@]})) || RANKS=(2 3 4)
mkdir -p "$OUT" bench/bin
go build -o bench/bin/goccl ./cmd/goccl || exit 1
. bench/host.sh
host_record "$OUT" || exit 1 # OUT/host.txt; DAMON=off stops the DAMON monitor for the run
TSV="$OUT/auto.tsv"
echo -e "ranks\tbytes\talgo\tround\ttime_us\tran" > "$TSV"
TDIR=${TUNE_DIR:-$OUT}
if [[ ${TUNE:-0} == 1 && ${COLL:-all_reduce} != all_reduce ]]; then
  echo "auto.sh: TUNE=1 calibrates all_reduce only; unset COLL" >&2; exit 2
fi
if [[ ${TUNE:-0} == 1 ]]; then
  mkdir -p "$TDIR"
  for np in "${RANKS[@]}"; do
    [[ -f $TDIR/tune-$np.json ]] && continue
    timeout 900 bench/bin/goccl tune --np "$np" --transport shm -o "$TDIR/tune-$np.json" > "$TDIR/tune-$np.txt" 2>&1 || {
      cat "$TDIR/tune-$np.txt" >&2; exit 1; }
    grep '^# .*ranks: staged' "$TDIR/tune-$np.txt" >&2
  done
fi
COLL=${COLL:-all_reduce}
TRANSPORT=${TRANSPORT:-auto}
case $COLL in
  all_reduce) ALGOS=(auto ring tree rd naive staged) ;;
  all_gather | reduce_scatter) ALGOS=(auto ring rd naive staged) ;;
  broadcast) ALGOS=(auto ring tree naive staged) ;;
  reduce) ALGOS=(auto ring tree naive) ;;
  *) echo "auto.sh: COLL=$COLL: want all_reduce, all_gather, reduce_scatter, broadcast or reduce" >&2; exit 2 ;;
esac
if [[ $TRANSPORT != auto && $TRANSPORT != shm ]]; then
  kept=()
  for a in "${ALGOS[@]}"; do [[ $a != staged ]] && kept+=("$a"); done
  ALGOS=("${kept[@]}")
fi
# sizes as five sweeps: iterations and warm-up fit the time per call (-f 2 as nccl-tests),
# so that every size times at least ~5 ms at 2 ranks (with 30 iterations from 128 KiB,
# 1-2 ms, one stall of the VM made one report 2-3x its neighbours': BENCHMARKS.md,
# "Speed", 27). --span 128M moves every sweep's buffers through 128 MiB, as the one sweep
# 8 B..128 MiB does (without it the first sweeps ran from the cache: "Speed", 20).
SWEEPS=("8 64K 1000 100" "128K 1M 200 20" "2M 4M 40 4" "8M 16M 16 2" "32M 128M 5 1")
INTERLEAVE=${INTERLEAVE:-1}
# Interleaved, a sweep's last number is --interleave's blocks. From 2 MiB one call's time
# spreads widely (at 3 ranks and 8 MiB, 2.4-8.0 ms, 24 % CV), and a median of 16 calls
# moved by 10-30 % between two names of one algorithm (auto and staged): the large sizes
# take 60-120 calls, in blocks of 2-6. Up to 1 MiB, blocks of 10-20 calls: with 10 blocks
# of 100 auto's median and that of the algorithm it ran differed by up to 1.17x at 8-64 B
# in auto62.
((INTERLEAVE)) && SWEEPS=("8 64K 1000 100 50" "128K 1M 400 20 40" "2M 4M 120 4 20" "8M 16M 60 2 20" "32M 128M 20 1 10")
SPAN=128M
FIRST=${FIRST_ROUND:-1}
for round in $(seq "$FIRST" $((FIRST + ROUNDS - 1))); do
  # Rotated by the round, and reversed every other round, so that no algorithm always
  # runs first or always after the same one (a slow tree report can slow the next).
  k=$(((round - 1) % ${#ALGOS[@]}))
  order=("${ALGOS[@]:k}" "${ALGOS[@]:0:k}")
  if ((round % 2 == 0)); then
    for ((i = 0, j = ${#order[@]} - 1; i < j; i++, j--)); do t=${order[i]}; order[i]=${order[j]}; order[j]=$t; done
  fi
  list="$(IFS=,; echo "${order[*]}")"
  skip=0
  ((INTERLEAVE)) || { list="${order[0]},$list"; skip=1; } # the first report is the warm-up
  for np in "${RANKS[@]}"; do
    echo "== round $round, $np ranks: $list" >&2
    for sw in "${SWEEPS[@]}"; do
      read -r lo hi iters warm blocks <<< "$sw"
      inter=()
      ((INTERLEAVE)) && inter=(--interleave "$blocks")
      tunefile=()
      [[ ${TUNE:-0} == 1 ]] && tunefile=(env GOCCL_TUNE_FILE="$TDIR/tune-$np.json")
      timeout 900 "${tunefile[@]}" bench/bin/goccl perf "$COLL" --np "$np" --transport "$TRANSPORT" --algo "$list" -b "$lo" -e "$hi" --span "$SPAN" -f 2 \
        -n "$iters" -w "$warm" -c 0 -z 2 --predict "${inter[@]}" 2>&1 |
        awk -v np="$np" -v r="$round" -v skip="$skip" '
          /algorithm:/ {rep++; a=$0; sub(/.*algorithm: /, "", a); sub(/ .*/, "", a)}
          /^ +[0-9]/ && rep > skip {print np"\t"$1"\t"a"\t"r"\t"$6"\t"$NF}' >> "$TSV"
    done
  done
done
/usr/bin/python3 bench/auto.py "$TSV" | tee "$OUT/auto.md"
