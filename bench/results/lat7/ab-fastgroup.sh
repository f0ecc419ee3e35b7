#!/bin/bash
# Interleaved A/B of bench/lat over shm (BENCHMARKS.md, "Speed", 41a): old is the build
# before the fast path for BatchSendRecv and AllToAllV (b2bb6fe), new the working tree.
# From the repository root:
#   git worktree add /tmp/oldtree b2bb6fe && (cd /tmp/oldtree && go build -o /tmp/old-goccl ./cmd/goccl && go build -o /tmp/old-lat ./bench/lat)
#   go build -o bench/bin/goccl ./cmd/goccl && go build -o bench/bin/lat ./bench/lat
#   bash bench/results/lat7/ab-fastgroup.sh    # writes /tmp/ab41/lat.tsv, prints medians
cd "$(dirname "$0")/../../.."
mkdir -p /tmp/ab41; out=/tmp/ab41/lat.tsv; : > $out
for round in 1 2 3 4 5; do
 for np in 2 3 4; do
  n=50000; w=5000; [[ $np == 2 ]] && n=200000 && w=20000
  for op in neighbors alltoallv; do
   for v in old new; do
    if [[ $v == old ]]; then G=/tmp/old-goccl; L=/tmp/old-lat; else G=bench/bin/goccl; L=bench/bin/lat; fi
    t=$(GOCCL_TRANSPORT=shm $G run -n $np -- $L -op $op -count ${COUNT:-2} -n $n -warm $w 2>&1 | tail -1 | awk '{print $(NF-1)}')
    echo -e "$round\t$np\t$op\t$v\t$t" >> $out
   done
  done
 done
done
python3 - <<'PY'
import statistics,collections
d=collections.defaultdict(list)
for l in open('/tmp/ab41/lat.tsv'):
    r,np,op,v,t=l.split()
    d[(np,op,v)].append(float(t))
for (np,op,v),xs in sorted(d.items()):
    print(np,op,v,"median %.2f min %.2f"%(statistics.median(xs),min(xs)), xs)
PY
