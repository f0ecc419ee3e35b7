#!/bin/bash
# shared.sh - AllReduce on buffers from AllocShared (goccl perf -R 2: the direct algorithm
# from shm.direct_min) against goccl on ordinary buffers (auto) and Open MPI 4.1's vader,
# 64 KiB..64 MiB at 2 and 4 ranks, as medians of REPS interleaved rounds (the order of the
# three tools rotates every round), so a slow minute of the VM falls on every tool alike.
#
#     bash bench/shared.sh [OUTDIR] [REPS]     # as root, from a clean clone; ~1 min per round
#
# Writes OUTDIR/shared.tsv (tool, ranks, bytes, round, us per call, busbw) and prints
# OUTDIR/shared.md. Run nothing else meanwhile.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/shared-$(date -u +%Y%m%dT%H%M%SZ)}
REPS=${2:-5}
mkdir -p "$OUT" bench/bin
go build -o bench/bin/goccl ./cmd/goccl || exit 1
command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null ||
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openmpi-bin libopenmpi-dev; } || exit 1
mpicc.openmpi -O2 -o bench/bin/mpi_allreduce bench/mpi_allreduce.c || exit 1
. bench/peer_env.sh # PEER_MALLOC: Open MPI measured at its best
MPIRUN=(timeout 600 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none "${PEER_MALLOC[@]}")
TSV="$OUT/shared.tsv"
echo -e "tool\tranks\tbytes\tround\ttime_us\tbusbw" > "$TSV"
SWEEPS=("65536 1048576 100 10" "4194304 67108864 10 2") # min max iters warm-up, factor 4
goccl_rows() { # label np round < perf output
  awk -v t="$1" -v np="$2" -v r="$3" '/^ +[0-9]/ {print t"\t"np"\t"$1"\t"r"\t"$6"\t"$8}'
}
run_tool() { # tool np round min max iters warm
  case $1 in
  shared) timeout 600 bench/bin/goccl perf all_reduce --np $2 --transport shm -R 2 -b $4 -e $5 -f 4 -n $6 -w $7 -z 2 -c 1 2>&1 |
    goccl_rows "goccl -R 2" $2 $3 ;;
  plain) timeout 600 bench/bin/goccl perf all_reduce --np $2 --transport shm -b $4 -e $5 -f 4 -n $6 -w $7 -z 2 -c 1 2>&1 |
    goccl_rows "goccl" $2 $3 ;;
  vader) "${MPIRUN[@]}" -np $2 --mca btl self,vader bench/bin/mpi_allreduce $4 $5 $6 $7 |
    awk -v np=$2 -v r=$3 -F'\t' '$1 ~ /^[0-9]+$/ {print "Open MPI vader\t"np"\t"$1"\t"r"\t"$2"\t"$4}' ;;
  esac
}
tools=(shared plain vader)
for round in $(seq "$REPS"); do
  echo "== round $round/$REPS" >&2
  for np in 2 4; do
    for sw in "${SWEEPS[@]}"; do
      for i in 0 1 2; do
        run_tool "${tools[$(((i + round) % 3))]}" $np $round $sw >> "$TSV"
      done
    done
  done
done
python3 - "$TSV" > "$OUT/shared.md" <<'PY'
import statistics, sys
from collections import defaultdict
pts = defaultdict(list)
for line in open(sys.argv[1]).read().splitlines()[1:]:
    tool, np, b, r, t, bw = line.split("\t")
    pts[(tool, int(np), int(b))].append((float(t), float(bw)))
sizes = sorted({k[2] for k in pts if k[0] == "goccl -R 2"})
rounds = max(len(v) for v in pts.values())
med = lambda k, i: statistics.median(x[i] for x in pts[k]) if k in pts else float("nan")
fmt = lambda b: f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
print(f"Medians over {rounds} interleaved rounds: time per call (us) and busbw (GB/s); ratio = vader's time / goccl -R 2's.\n")
print("| ranks | size | goccl -R 2 | goccl | Open MPI vader | -R 2 against vader |")
print("|---:|---:|---|---|---|---|")
for np in (2, 4):
    for b in sizes:
        s, p, v = ("goccl -R 2", np, b), ("goccl", np, b), ("Open MPI vader", np, b)
        print(f"| {np} | {fmt(b)} | {med(s,0):.1f} us, {med(s,1):.2f} | {med(p,0):.1f} us, {med(p,1):.2f} | {med(v,0):.1f} us, {med(v,1):.2f} | {med(v,0)/med(s,0):.2f}x |")
print("\nEvery sample (busbw per round):\n")
for k in sorted(pts, key=lambda k: (k[1], k[2], k[0])):
    print(f"- {k[0]}, {k[1]} ranks, {fmt(k[2])}: {' '.join(f'{x[1]:.2f}' for x in pts[k])}")
PY
cat "$OUT/shared.md"
