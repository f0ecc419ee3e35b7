#!/bin/bash
# predict.sh - how far is the cost model's time (`goccl perf --predict`) from the measured
# one, for the algorithms the communicator runs on local ranks over shm: auto's AllReduce
# at 2, 3 and 4 ranks (ring, rd, naive, and staged from shm.staged_min), staged's
# AllGather, ReduceScatter and Broadcast at 3 and 4 ranks, and direct's six collectives
# on AllocShared buffers (-R 2) at 2 and 4 ranks.
#
#     bash bench/predict.sh [OUTDIR] [ROUNDS]   # from a clean clone; about 2 min per round
#
# Every launch sweeps its sizes by 4x (8x with -R 2) with --predict; the summary takes,
# per collective, rank count and algorithm that ran, the median over rounds of each
# size's error (model against the out-of-place time) and prints their range. Writes
# OUTDIR/predict.tsv (collective, ranks, buffers, bytes, round, measured us, model us,
# algorithm; and per round a "membw" line, two threads copying, GB/s in the model
# column) and OUTDIR/host.txt (bench/host.sh), and prints OUTDIR/predict.md. Run nothing else
# meanwhile.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/predict-$(date -u +%Y%m%dT%H%M%SZ)}
ROUNDS=${2:-3}
mkdir -p "$OUT" bench/bin
go build -o bench/bin/goccl ./cmd/goccl || exit 1
go build -o bench/bin/membw ./bench/membw || exit 1
source bench/host.sh
host_state > "$OUT/host.txt"
TSV=$OUT/predict.tsv
: > "$TSV"
# collective, ranks, -R, lo, hi, factor
RUNS=(
  "all_reduce 2 0 8 128M 4" "all_reduce 3 0 8 128M 4" "all_reduce 4 0 8 128M 4"
  "all_gather 3 0 64K 64M 8" "all_gather 4 0 64K 64M 8"
  "reduce_scatter 3 0 64K 64M 8" "reduce_scatter 4 0 64K 64M 8"
  "broadcast 3 0 8M 64M 8" "broadcast 4 0 8M 64M 8"
)
for c in all_reduce reduce_scatter all_gather broadcast alltoall scatter; do
  RUNS+=("$c 2 2 64K 64M 8" "$c 4 2 64K 64M 8")
done
for ((round = 1; round <= ROUNDS; round++)); do
  bench/bin/membw | awk -v r="$round" '{print "membw\t2\tnone\t0\t"r"\t0\t"$2"\tcopy2"}' >> "$TSV"
  for run in "${RUNS[@]}"; do
    read -r coll np reg lo hi f <<< "$run"
    echo "== round $round: $coll, $np ranks, -R $reg" >&2
    timeout 600 bench/bin/goccl perf "$coll" --np "$np" --transport shm -R "$reg" -b "$lo" -e "$hi" -f "$f" \
      -n 20 -w 5 -c 0 --predict 2>&1 |
      awk -v c="$coll" -v np="$np" -v reg="$reg" -v r="$round" \
        'NF == 16 && /^ +[0-9]/ && $1 > 0 {print c"\t"np"\t"(reg == 2 ? "shared" : "ordinary")"\t"$1"\t"r"\t"$6"\t"$14"\t"$16}' >> "$TSV"
  done
done
/usr/bin/python3 - "$TSV" << 'EOF' | tee "$OUT/predict.md"
import collections, statistics, sys
errs = collections.defaultdict(lambda: collections.defaultdict(list))
membw = []
for line in open(sys.argv[1]):
    coll, np, bufs, size, _, meas, model, algo = line.split("\t")
    if coll == "membw":
        membw.append(float(model))
        continue
    if model == "N/A":
        continue
    key = (coll, int(np), bufs, algo.strip())
    errs[key][int(size)].append(100 * (float(model) - float(meas)) / float(meas))
print(f"Two threads copying: {statistics.median(membw):.1f} GB/s (median; {min(membw):.1f}-{max(membw):.1f} over the rounds).\n")
print("| collective | ranks | buffers | algorithm | sizes | model error (median per size over rounds): min .. max | median |")
print("|---|---:|---|---|---|---|---:|")
for key in sorted(errs):
    med = {s: statistics.median(v) for s, v in errs[key].items()}
    sizes = sorted(med)
    span = f"{sizes[0]}-{sizes[-1]}" if len(sizes) > 1 else f"{sizes[0]}"
    vals = [med[s] for s in sizes]
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {span} | {min(vals):+.0f} % .. {max(vals):+.0f} % | {statistics.median(vals):+.0f} % |")
EOF
