#!/bin/bash
# headline.sh - the headline ratios of BENCHMARKS.md (issue 10's targets) as medians of
# REPS interleaved rounds: every round runs goccl (shm and tcp, auto and ring; at 64 MiB
# over shm also with buffers from AllocShared, perf -R 2), Open MPI
# 4.1 (vader, tcp) and PyTorch gloo at 8 B and 64 MiB, 2 and 4 ranks, then goccl auto
# and the same peers at the mid sizes 64 KiB-4 MiB, one after another, so a slow minute
# of the shared VM falls on every tool alike. One sweep of
# bench/allreduce.sh is one sample per point, and single launches here differ by 10-40 %.
#
#     bash bench/headline.sh [OUTDIR] [REPS]     # as root, from a clean clone; ~3.5 min per round
#
# MID=0 leaves the mid sizes out; TARGETS=0 runs only them. ONLINE=1 adds goccl auto
# with GOCCL_ALGO_TUNE=online (auto's online choice of the AllReduce algorithm) at 64 MiB
# and at the mid sizes, as its own launches in every round (the rows goccl/online).
# Each round also measures the references the 64 MiB rows are set against: bench/membw
# (two threads copying, C; the shm rows give their share of 4C/5W) and bench/tcpbw (two
# endpoints exchanging over loopback TCP, T; a ring of W ranks on this machine moves
# 2(W-1) vectors' worth through the loopback, so the tcp rows give their share of T/W).
# Writes OUTDIR/headline.tsv (tool, transport, ranks, bytes, round, us per call, busbw,
# wrong elements) and OUTDIR/host.txt (bench/host.sh), and prints OUTDIR/headline.md:
# per point the median over rounds, each target's ratio, and WRONG DATA if any tool
# counted a wrong element. Run nothing else meanwhile. DAMON=off stops the
# kernel's DAMON monitor for the run, for every tool alike, and restarts it at exit
# (BENCHMARKS.md, "Speed", 28).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/headline-$(date -u +%Y%m%dT%H%M%SZ)}
REPS=${2:-5}
mkdir -p "$OUT" bench/bin
go build -o bench/bin/goccl ./cmd/goccl || exit 1
go build -o bench/bin/membw ./bench/membw || exit 1
go build -o bench/bin/tcpbw ./bench/tcpbw || exit 1
. bench/host.sh
host_record "$OUT" || exit 1 # OUT/host.txt; DAMON=off stops the DAMON monitor for the run
need=()
command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null || need+=(openmpi-bin libopenmpi-dev)
/usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch)
if ((${#need[@]})); then
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" || exit 1
fi
mpicc.openmpi -O2 -o bench/bin/mpi_allreduce bench/mpi_allreduce.c || exit 1
. bench/peer_env.sh # PEER_MALLOC: Open MPI measured at its best
MPIRUN=(timeout 600 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none "${PEER_MALLOC[@]}")
TSV="$OUT/headline.tsv"
echo -e "tool\ttransport\tranks\tbytes\tround\ttime_us\tbusbw\twrong" > "$TSV"
# iterations and warm-up per size (and transport). 8 B gets a long warm-up for every
# tool: a process's first 5-10 ms after it waited (at init) run 2-10x slower whatever it
# does, and 30 ms of spinning before the timed loop removes that (BENCHMARKS.md, "Speed",
# 12). 2000 calls cover it over tcp (15 us each) and gloo; over shared memory (about
# 1 us) it takes 20000, for goccl and vader alike. The timed calls over shared memory
# are 20000 too: 2000 of them are 2 ms, a window in which one hiccup of the VM shows
# (goccl's first timed half was 20-80 % slower than its second in 3 of 12 such
# launches, BENCHMARKS.md, "Speed", 15).
args() { # bytes transport
  if [[ $1 != 8 ]]; then echo "10 2"; elif [[ $2 == shm ]]; then echo "20000 20000"; else echo "2000 2000"; fi
}
# goccl runs with -z 2, a wait after every call (its blocking API), because that is how the
# peers' benchmarks call MPI_Allreduce and gloo's allreduce: back to back, each blocking.
# nccl-tests' default -z 0 issues every call first and then waits; on a CPU library that
# times a queue of 2000 operations (0.3-0.5 us more per 8-byte call over shm), which no peer does.
# WRONG is an awk function for goccl's rows: the wrong elements of both halves (columns
# 9 and 13 of perf's table), N/A when unchecked.
WRONG='function wrong(a, b) { return a == "N/A" ? a : a + b } '
peer_row() { # tool transport np round < the peer's TSV lines (size, us, algbw, busbw, wrong)
  awk -v t="$1" -v tr="$2" -v np="$3" -v r="$4" -F'\t' '$1 ~ /^[0-9]+$/ {print t"\t"tr"\t"np"\t"$1"\t"r"\t"$2"\t"$4"\t"$5}'
}
TARGET_NP=(2 4)
((${TARGETS:-1})) || TARGET_NP=()
MID=${MID:-1}
for round in $(seq "$REPS"); do
  echo "== round $round/$REPS" >&2
  # auto and ring take turns going first: the first test of a launch ran slower in some
  # rounds (8 B over shm at 2 ranks: auto 0.58-0.65 us against the ring's 0.48-0.50 in
  # the first round of headline32, 33 and 35, where auto always went first).
  ORDER=auto,ring
  ((round % 2)) || ORDER=ring,auto
  bench/bin/membw | awk -v r="$round" '{print "membw\tcopy2\t2\t0\t"r"\t0\t"$2"\t0"}' >> "$TSV"
  bench/bin/tcpbw | awk -v r="$round" '{print "tcpbw\tloopback\t2\t0\t"r"\t0\t"$2"\t0"}' >> "$TSV"
  for np in "${TARGET_NP[@]}"; do
    for bytes in 8 67108864; do
      for tr in shm tcp; do
        read -r iters warm < <(args $bytes $tr)
        timeout 600 bench/bin/goccl perf all_reduce --np $np --transport $tr --algo "$ORDER" \
          -b $bytes -e $bytes -n $iters -w $warm -z 2 -c 1 2>&1 |
          awk -v tr=$tr -v np=$np -v r=$round "$WRONG"'/algorithm:/ {a=$0; sub(/.*algorithm: /, "", a); sub(/ .*/, "", a)}
            /^ +[0-9]/ {print "goccl/"a"\t"tr"\t"np"\t"$1"\t"r"\t"$6"\t"$8"\t"wrong($9, $13)}' >> "$TSV"
        if [[ ${ONLINE:-0} == 1 && $bytes != 8 ]]; then # 8 B is below what the online choice tunes
          GOCCL_ALGO_TUNE=online timeout 600 bench/bin/goccl perf all_reduce --np $np --transport $tr --algo auto \
            -b $bytes -e $bytes -n $iters -w $warm -z 2 -c 1 2>&1 |
            awk -v tr=$tr -v np=$np -v r=$round "$WRONG"'/^ +[0-9]/ {print "goccl/online\t"tr"\t"np"\t"$1"\t"r"\t"$6"\t"$8"\t"wrong($9, $13)}' >> "$TSV"
        fi
      done
      if [[ $bytes != 8 ]]; then # buffers from AllocShared: the direct algorithm (8 B stays below shm.direct_min)
        timeout 600 bench/bin/goccl perf all_reduce --np $np --transport shm --algo auto -R 2 \
          -b $bytes -e $bytes -n $iters -w $warm -z 2 -c 1 2>&1 |
          awk -v np=$np -v r=$round "$WRONG"'/^ +[0-9]/ {print "goccl/R2\tshm\t"np"\t"$1"\t"r"\t"$6"\t"$8"\t"wrong($9, $13)}' >> "$TSV"
      fi
      read -r iters warm < <(args $bytes shm)
      "${MPIRUN[@]}" -np $np --mca btl self,vader bench/bin/mpi_allreduce $bytes $bytes $iters $warm |
        peer_row "Open MPI" vader $np $round >> "$TSV"
      read -r iters warm < <(args $bytes tcp)
      "${MPIRUN[@]}" -np $np --mca btl self,tcp --mca btl_tcp_if_include lo bench/bin/mpi_allreduce $bytes $bytes $iters $warm |
        peer_row "Open MPI" tcp $np $round >> "$TSV"
      OMP_NUM_THREADS=1 timeout 600 /usr/bin/python3 bench/gloo_allreduce.py $np $bytes $bytes $iters $warm |
        peer_row gloo tcp $np $round >> "$TSV"
    done
  done
  ((MID)) || continue
  # The mid sizes, 64 KiB-4 MiB, where the peers peak: goccl auto against each peer in
  # two sweeps per tool, iterations fitted to the time per call.
  for np in 2 4; do
    for sweep in "65536 524288 300 30" "1048576 4194304 60 6"; do
      read -r lo hi iters warm <<< "$sweep"
      for tr in shm tcp; do
        timeout 600 bench/bin/goccl perf all_reduce --np $np --transport $tr --algo auto \
          -b $lo -e $hi -f 2 -n $iters -w $warm -z 2 -c 1 2>&1 |
          awk -v tr=$tr -v np=$np -v r=$round "$WRONG"'/^ +[0-9]/ {print "goccl/auto\t"tr"\t"np"\t"$1"\t"r"\t"$6"\t"$8"\t"wrong($9, $13)}' >> "$TSV"
        if [[ ${ONLINE:-0} == 1 ]]; then
          GOCCL_ALGO_TUNE=online timeout 600 bench/bin/goccl perf all_reduce --np $np --transport $tr --algo auto \
            -b $lo -e $hi -f 2 -n $iters -w $warm -z 2 -c 1 2>&1 |
            awk -v tr=$tr -v np=$np -v r=$round "$WRONG"'/^ +[0-9]/ {print "goccl/online\t"tr"\t"np"\t"$1"\t"r"\t"$6"\t"$8"\t"wrong($9, $13)}' >> "$TSV"
        fi
      done
      "${MPIRUN[@]}" -np $np --mca btl self,vader bench/bin/mpi_allreduce $lo $hi $iters $warm |
        peer_row "Open MPI" vader $np $round >> "$TSV"
      "${MPIRUN[@]}" -np $np --mca btl self,tcp --mca btl_tcp_if_include lo bench/bin/mpi_allreduce $lo $hi $iters $warm |
        peer_row "Open MPI" tcp $np $round >> "$TSV"
      OMP_NUM_THREADS=1 timeout 600 /usr/bin/python3 bench/gloo_allreduce.py $np $lo $hi $iters $warm |
        peer_row gloo tcp $np $round >> "$TSV"
    done
  done
done
python3 - "$TSV" > "$OUT/headline.md" <<'EOF'
import statistics, sys
from collections import defaultdict
pts = defaultdict(list)
bad = []
for line in open(sys.argv[1]).read().splitlines()[1:]:
    tool, tr, np, b, r, t, bw, wrong = line.split("\t")
    pts[(tool, tr, int(np), int(b))].append((float(t), float(bw)))
    if wrong not in ("0", "N/A"):
        bad.append(f"{tool} {tr} {np} ranks {b} B round {r}: {wrong} wrong")
rounds = max(len(v) for v in pts.values())
med = lambda k, i: statistics.median(x[i] for x in pts[k]) if k in pts else float("nan")
c = med(("membw", "copy2", 2, 0), 1)
T = med(("tcpbw", "loopback", 2, 0), 1)
print(f"Medians over {rounds} interleaved rounds; membw (two threads copying): {c:.2f} GB/s; "
      f"tcpbw (two endpoints exchanging over loopback TCP, both directions together): {T:.2f} GB/s.")
print("WRONG DATA: " + "; ".join(bad) + "\n" if bad else "Every point reported 0 wrong elements.\n")
M = 64 << 20
if any(k[3] == M for k in pts):
    print("| target | goccl (auto / ring) | peer | ratio (auto / ring) |")
    print("|---|---|---|---|")
    for np, want in ((2, 3), (4, 2)):
        a, g, v = med(("goccl/auto", "shm", np, M), 1), med(("goccl/ring", "shm", np, M), 1), med(("Open MPI", "vader", np, M), 1)
        print(f"| shm busbw 64 MiB, {np} ranks >= {want}x vader | {a:.2f} / {g:.2f} GB/s ({100*a/(4*c/(5*np)):.0f} % / {100*g/(4*c/(5*np)):.0f} % of 4C/5W) | {v:.2f} | {a/v:.2f}x / {g/v:.2f}x |")
        o = med(("goccl/online", "shm", np, M), 1)
        if o == o:  # ONLINE=1 ran
            print(f"| the same, auto with algo_tune online | {o:.2f} GB/s ({100*o/(4*c/(5*np)):.0f} % of 4C/5W) | {v:.2f} | {o/v:.2f}x |")
        d = med(("goccl/R2", "shm", np, M), 1)
        bd = 4*c*(np-1)/(np*(3*np-1))  # direct's bound: (3W-1)/W bytes through memory per byte, per rank
        print(f"| the same, buffers from AllocShared (perf -R 2, algorithm direct) | {d:.2f} GB/s ({100*d/bd:.0f} % of 4C(W-1)/(W(3W-1))) | {v:.2f} | {d/v:.2f}x |")
    for np in (2, 4):
        a, g = med(("goccl/auto", "tcp", np, M), 1), med(("goccl/ring", "tcp", np, M), 1)
        for peer in (("Open MPI", "tcp"), ("gloo", "tcp")):
            v = med(peer + (np, M), 1)
            print(f"| tcp busbw 64 MiB, {np} ranks >= 1.5x {peer[0]} {peer[1] if peer[0] != 'gloo' else ''} | {a:.2f} / {g:.2f} GB/s ({100*a/(T/np):.0f} % / {100*g/(T/np):.0f} % of T/W) | {v:.2f} ({100*v/(T/np):.0f} %) | {a/v:.2f}x / {g/v:.2f}x |")
            o = med(("goccl/online", "tcp", np, M), 1)
            if o == o:
                print(f"| the same, auto with algo_tune online | {o:.2f} GB/s ({100*o/(T/np):.0f} % of T/W) | {v:.2f} | {o/v:.2f}x |")
    for np in (2, 4):
        for tr, peer in (("shm", ("Open MPI", "vader")), ("tcp", ("Open MPI", "tcp"))):
            a, g, v = med(("goccl/auto", tr, np, 8), 0), med(("goccl/ring", tr, np, 8), 0), med(peer + (np, 8), 0)
            print(f"| 8 B latency, {tr}, {np} ranks <= {peer[0]} {peer[1]} | {a:.1f} / {g:.1f} us | {v:.1f} us | {a/v:.2f}x / {g/v:.2f}x the peer's time |")
mids = sorted({k[3] for k in pts if (64 << 10) <= k[3] <= (4 << 20)})
if mids:
    print(f"\nMid sizes: goccl auto's time per call against the peer's (us, medians), and the ratio; ** marks goccl slower.\n")
    cols = [(tr, np, peer, f"{tr} {np} ranks vs {name}") for np in (2, 4)
            for tr, peer, name in (("shm", ("Open MPI", "vader"), "vader"), ("tcp", ("Open MPI", "tcp"), "Open MPI tcp"), ("tcp", ("gloo", "tcp"), "gloo"))]
    print("| size | " + " | ".join(c[3] for c in cols) + " |")
    print("|---:|" + "---|" * len(cols))
    for b in mids:
        cells = []
        for tr, np, peer, _ in cols:
            a, v = med(("goccl/auto", tr, np, b), 0), med(peer + (np, b), 0)
            o = med(("goccl/online", tr, np, b), 0)
            on = f"; online {o/v:.2f}x" if o == o else ""
            cells.append(f"{'**' if a > v else ''}{a:.1f} vs {v:.1f} ({a/v:.2f}x){'**' if a > v else ''}{on}")
        print(f"| {b >> 10} KiB | " + " | ".join(cells) + " |")
print("\nEvery sample (us per call, busbw GB/s):\n")
print("| tool | transport | ranks | bytes | time per round (us) | busbw per round |")
print("|---|---|---:|---:|---|---|")
for k in sorted(pts, key=lambda k: (k[2], k[3], k[1], k[0])):
    if k[0] in ("membw", "tcpbw"):
        continue
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {' '.join(f'{x[0]:.1f}' for x in pts[k])} | {' '.join(f'{x[1]:.2f}' for x in pts[k])} |")
EOF
cat "$OUT/headline.md"
