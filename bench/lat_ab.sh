#!/bin/bash
# lat_ab.sh - an interleaved A/B of bench/lat between two builds: for each round, world
# size, transport and call, the old build's launch and then the new one's, so drift in
# the host hits both alike; prints a table of medians (with ranges) from the TSV.
#
#     OLD_REV=REV bash bench/lat_ab.sh OUT.tsv [ROUNDS]   # from a clean clone, as root
#
# old is /tmp/old-goccl and /tmp/old-lat, built from OLD_REV (which only labels the
# table), for example:
#     git worktree add /tmp/oldtree REV && (cd /tmp/oldtree && go build -o /tmp/old-goccl ./cmd/goccl && go build -o /tmp/old-lat ./bench/lat)
# new is the working tree, built here into bench/bin. SHM_OPS and TCP_OPS pick the calls
# per transport (default "neighbors alltoallv" for both), NP the world sizes ("2 3 4").
# Calls per launch: 200000 (20000 warm) over shm at 2 ranks, 50000 (5000) over shm at
# more, 5000 (500) over tcp. BENCHMARKS.md, "Speed", 42 and 43 used it
# (bench/results/lat8/ab-session41.sh, bench/results/lat9/ab-session42.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/lat_ab.tsv}; : > "$out"
for b in /tmp/old-goccl /tmp/old-lat; do
  [[ -x $b ]] || { echo "lat_ab.sh: $b is missing: build the old revision first (see the header)" >&2; exit 2; }
done
go build -o bench/bin/goccl ./cmd/goccl && go build -o bench/bin/lat ./bench/lat || exit 1
for round in $(seq "${2:-4}"); do
 for np in ${NP:-2 3 4}; do
  for tr in shm tcp; do
   ops=${SHM_OPS:-neighbors alltoallv}; n=50000; w=5000
   [[ $tr == shm && $np == 2 ]] && n=200000 && w=20000
   [[ $tr == tcp ]] && ops=${TCP_OPS:-neighbors alltoallv} && n=5000 && w=500
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
python3 - "$out" "${OLD_REV:-old}" <<'PY'
import statistics, collections, sys
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r, tr, np, op, v, t = l.split()
    d[(tr, int(np), op, v)].append(float(t))
print(f"| transport | ranks | call | old ({sys.argv[2]}), us | new, us | new / old |")
print("|---|---:|---|---|---|---|")
for (tr, np, op, v) in sorted(d):
    if v != "old":
        continue
    o, n = d[(tr, np, op, "old")], d[(tr, np, op, "new")]
    print(f"| {tr} | {np} | {op} | {statistics.median(o):.2f} ({min(o):.2f}-{max(o):.2f}) | {statistics.median(n):.2f} ({min(n):.2f}-{max(n):.2f}) | {statistics.median(n)/statistics.median(o):.2f}x |")
PY
