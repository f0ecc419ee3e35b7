#!/bin/bash
# ab-session43.sh - the tcp mid sizes (64 KiB-4 MiB AllReduce, float32 sum) of session 43's
# build against the build before it (OLD_REV, default be43dbf) and Open MPI's tcp BTL,
# launches interleaved round after round so that a slow minute hits all three alike:
#
#     bash bench/results/tcpmid1/ab-session43.sh [OUT.tsv] [ROUNDS]
#
# Writes OUT.tsv (tool, ranks, bytes, round, us per call) and OUT.md (medians, ratios).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${1:-bench/results/tcpmid1/ab-session43.tsv}
ROUNDS=${2:-8}
OLD_REV=${OLD_REV:-be43dbf}
mkdir -p bench/bin
. bench/host.sh
host_record "$(dirname "$OUT")" || exit 1 # host.txt beside OUT
go build -o bench/bin/goccl ./cmd/goccl
rm -rf /tmp/old-goccl-src && git worktree add -f /tmp/old-goccl-src "$OLD_REV" >/dev/null 2>&1
(cd /tmp/old-goccl-src && go build -o /tmp/old-goccl ./cmd/goccl)
git worktree remove --force /tmp/old-goccl-src
command -v mpicc.openmpi >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openmpi-bin libopenmpi-dev; }
mpicc.openmpi -O2 -o bench/bin/mpi_allreduce bench/mpi_allreduce.c
. bench/peer_env.sh
echo -e "tool\tranks\tbytes\tround\tus" > "$OUT"
for round in $(seq "$ROUNDS"); do
  echo "== round $round/$ROUNDS" >&2
  for np in 2 4; do
    for sweep in "65536 524288 300 30" "1048576 4194304 60 6"; do
      read -r lo hi iters warm <<< "$sweep"
      for tool in old new; do
        bin=bench/bin/goccl; [[ $tool == old ]] && bin=/tmp/old-goccl
        timeout 600 "$bin" perf all_reduce --np $np --transport tcp --algo auto -b $lo -e $hi -f 2 \
          -n $iters -w $warm -z 2 -c 1 2>&1 |
          awk -v t=$tool -v np=$np -v r=$round '/^ +[0-9]/ { if ($9 != 0 || $13 != 0) { print "wrong values" > "/dev/stderr"; exit 1 }
            print t"\t"np"\t"$1"\t"r"\t"$6 }' >> "$OUT"
      done
      timeout 600 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none "${PEER_MALLOC[@]}" -np $np \
        --mca btl self,tcp --mca btl_tcp_if_include lo bench/bin/mpi_allreduce $lo $hi $iters $warm |
        awk -v np=$np -v r=$round -F'\t' '$1 ~ /^[0-9]+$/ { print "ompi\t"np"\t"$1"\t"r"\t"$2 }' >> "$OUT"
    done
  done
done
python3 - "$OUT" > "${OUT%.tsv}.md" <<'PY'
import statistics, sys
from collections import defaultdict
t = defaultdict(list)
for line in open(sys.argv[1]).read().splitlines()[1:]:
    tool, np, b, r, us = line.split("\t")
    t[(tool, int(np), int(b))].append(float(us))
rounds = max(len(v) for v in t.values())
print(f"AllReduce float32 sum over tcp, auto; medians over {rounds} interleaved rounds, us per call (every goccl launch checked its values).\n")
print("| ranks | bytes | before | after | after/before | Open MPI tcp | after/Open MPI |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for np, b in sorted({(k[1], k[2]) for k in t}):
    o, n, m = (statistics.median(t[(x, np, b)]) for x in ("old", "new", "ompi"))
    print(f"| {np} | {b >> 10} KiB | {o:.1f} | {n:.1f} | {n / o:.2f} | {m:.1f} | {n / m:.2f} |")
PY
cat "${OUT%.tsv}.md"
