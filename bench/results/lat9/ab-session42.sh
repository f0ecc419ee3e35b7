#!/bin/bash
# Interleaved A/B of bench/lat (BENCHMARKS.md, "Speed", 43): old is the build before
# the change (508c480), new the working tree; small calls over shm and tcp (the batch
# and AllToAllV, whose receives now run on the links themselves), with SendRecv and
# AllReduce, which did not change, beside them. From the repository root:
#   git worktree add /tmp/oldtree 508c480 && (cd /tmp/oldtree && go build -o /tmp/old-goccl ./cmd/goccl && go build -o /tmp/old-lat ./bench/lat)
#   go build -o bench/bin/goccl ./cmd/goccl && go build -o bench/bin/lat ./bench/lat
#   bash bench/results/lat9/ab-session42.sh OUT.tsv [ROUNDS]   # prints medians
cd "$(dirname "$0")/../../.."
out=${1:-/tmp/ab43.tsv}; : > "$out"
for round in $(seq "${2:-4}"); do
 for np in 2 3 4; do
  for tr in shm tcp; do
   ops="neighbors alltoallv sendrecv allreduce"; n=50000; w=5000
   [[ $tr == shm && $np == 2 ]] && n=200000 && w=20000
   [[ $tr == tcp ]] && ops="neighbors alltoallv" && n=5000 && w=500
   for op in $ops; do
    for v in old new; do
     if [[ $v == old ]]; then G=/tmp/old-goccl; L=/tmp/old-lat; else G=bench/bin/goccl; L=bench/bin/lat; fi
     t=$(GOCCL_TRANSPORT=$tr $G run -n $np -- $L -op $op -count 2 -n $n -warm $w 2>&1 | tail -1 | awk '{print $(NF-1)}')
     echo -e "$round\t$tr\t$np\t$op\t$v\t$t" >> "$out"
    done
   done
  done
 done
done
python3 - "$out" <<'PY'
import statistics, collections, sys
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r, tr, np, op, v, t = l.split()
    d[(tr, int(np), op, v)].append(float(t))
print("| transport | ranks | call | old (508c480), us | new, us | new / old |")
print("|---|---:|---|---|---|---|")
for (tr, np, op, v) in sorted(d):
    if v != "old":
        continue
    o, n = d[(tr, np, op, "old")], d[(tr, np, op, "new")]
    print(f"| {tr} | {np} | {op} | {statistics.median(o):.2f} ({min(o):.2f}-{max(o):.2f}) | {statistics.median(n):.2f} ({min(n):.2f}-{max(n):.2f}) | {statistics.median(n)/statistics.median(o):.2f}x |")
PY
