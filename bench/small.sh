#!/bin/bash
# small.sh - the small AllReduce over shared memory, 8 B-16 KiB float32 sum, goccl
# (auto) against Open MPI 4.1's vader, as medians of REPS interleaved rounds at 2 and 4
# ranks (BENCHMARKS.md, "Speed", 34). Each round runs every tool once, one after
# another, so a slow minute of the shared VM falls on every tool alike.
#
#     bash bench/small.sh [OUTDIR] [REPS]     # as root, from a clean clone; ~1 min per round
#
# B=path/to/goccl adds another goccl build as "goccl/B" (an A/B against an older commit,
# built with `go build -o PATH ./cmd/goccl` in a git worktree). NP="2 4" picks the
# world sizes. Writes OUTDIR/small.tsv (tool, ranks, bytes, round, us per call, wrong
# elements) and prints OUTDIR/small.md: per size the median time per call of each tool
# and goccl's time over vader's. Run nothing else meanwhile.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/small-$(date -u +%Y%m%dT%H%M%SZ)}
REPS=${2:-5}
mkdir -p "$OUT" bench/bin
go build -o bench/bin/goccl ./cmd/goccl || exit 1
. bench/host.sh
host_record "$OUT" || exit 1
if ! command -v mpirun.openmpi >/dev/null || ! command -v mpicc.openmpi >/dev/null; then
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openmpi-bin libopenmpi-dev || exit 1
fi
mpicc.openmpi -O2 -o bench/bin/mpi_allreduce bench/mpi_allreduce.c || exit 1
. bench/peer_env.sh
MPIRUN=(timeout 600 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none "${PEER_MALLOC[@]}")
TSV="$OUT/small.tsv"
echo -e "tool\tranks\tbytes\tround\ttime_us\twrong" > "$TSV"
# 20000 calls after 20000 of warm-up for every tool and size, as headline.sh's 8 B over
# shared memory (its comment says why); -z 2: a wait after every call, as the peers call.
ITERS=20000
TOOLS=(goccl)
[[ -n ${B:-} ]] && TOOLS+=(B)
WRONG='function wrong(a, b) { return a == "N/A" ? a : a + b } '
for round in $(seq "$REPS"); do
  echo "== round $round/$REPS" >&2
  for np in ${NP:-2 4}; do
    for t in "${TOOLS[@]}"; do
      bin=bench/bin/goccl name=goccl
      [[ $t == B ]] && bin=$B name=goccl/B
      timeout 600 "$bin" perf all_reduce --np $np --transport shm --algo auto \
        -b 8 -e 16384 -f 2 -n $ITERS -w $ITERS -z 2 -c 1 2>&1 |
        awk -v t=$name -v np=$np -v r=$round "$WRONG"'/^ +[0-9]/ {print t"\t"np"\t"$1"\t"r"\t"$6"\t"wrong($9, $13)}' >> "$TSV"
    done
    "${MPIRUN[@]}" -np $np --mca btl self,vader bench/bin/mpi_allreduce 8 16384 $ITERS $ITERS |
      awk -v np=$np -v r=$round -F'\t' '$1 ~ /^[0-9]+$/ {print "vader\t"np"\t"$1"\t"r"\t"$2"\t"$5}' >> "$TSV"
  done
done
python3 - "$TSV" > "$OUT/small.md" <<'PY'
import statistics, sys
from collections import defaultdict
pts = defaultdict(list)
bad = []
for line in open(sys.argv[1]).read().splitlines()[1:]:
    tool, np, b, r, t, wrong = line.split("\t")
    pts[(tool, int(np), int(b))].append(float(t))
    if wrong not in ("0", "N/A"):
        bad.append(f"{tool} {np} ranks {b} B round {r}: {wrong} wrong")
tools = sorted({k[0] for k in pts}, key=lambda t: (t == "vader", t))
rounds = max(len(v) for v in pts.values())
print(f"Medians over {rounds} interleaved rounds (us per call); the ratio is goccl's time over vader's.")
print("WRONG DATA: " + "; ".join(bad) + "\n" if bad else "Every point reported 0 wrong elements.\n")
for np in sorted({k[1] for k in pts}):
    print(f"{np} ranks:\n")
    print("| bytes | " + " | ".join(tools) + " | goccl / vader | every round, goccl; vader |")
    print("|---:|" + "---|" * (len(tools) + 2))
    for b in sorted({k[2] for k in pts if k[1] == np}):
        med = {t: statistics.median(pts[(t, np, b)]) for t in tools if (t, np, b) in pts}
        ratio = med["goccl"] / med["vader"] if "goccl" in med and "vader" in med else float("nan")
        rows = "; ".join(" ".join(f"{x:.2f}" for x in pts[(t, np, b)]) for t in ("goccl", "vader") if (t, np, b) in pts)
        print(f"| {b} | " + " | ".join(f"{med[t]:.2f}" if t in med else "-" for t in tools) + f" | {ratio:.2f}x | {rows} |")
    print()
PY
cat "$OUT/small.md"
