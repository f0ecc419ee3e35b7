#!/bin/bash
# Interleaved A/B of bench/lat (BENCHMARKS.md, "Speed", 43): old is the build before
# the change (508c480), new the working tree; small calls over shm and tcp (the batch
# and AllToAllV, whose receives now run on the links themselves), with SendRecv and
# AllReduce, which did not change, beside them over shm. From the repository root:
#   git worktree add /tmp/oldtree 508c480 && (cd /tmp/oldtree && go build -o /tmp/old-goccl ./cmd/goccl && go build -o /tmp/old-lat ./bench/lat)
#   bash bench/results/lat9/ab-session42.sh OUT.tsv [ROUNDS]   # prints medians
cd "$(dirname "$0")/../../.."
OLD_REV=508c480 SHM_OPS="neighbors alltoallv sendrecv allreduce" TCP_OPS="neighbors alltoallv" \
  exec bash bench/lat_ab.sh "${1:-/tmp/ab43.tsv}" "${2:-4}"
