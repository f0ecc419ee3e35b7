#!/bin/bash
# Interleaved A/B of bench/lat (BENCHMARKS.md, "Speed", 42): old is the build before
# this session (ca21d0b), new the working tree; small calls over shm (the batch and
# AllToAllV, whose descriptions are now reused) and over tcp (whose links now take
# TrySend). From the repository root:
#   git worktree add /tmp/oldtree ca21d0b && (cd /tmp/oldtree && go build -o /tmp/old-goccl ./cmd/goccl && go build -o /tmp/old-lat ./bench/lat)
#   bash bench/results/lat8/ab-session41.sh OUT.tsv [ROUNDS]   # prints medians
cd "$(dirname "$0")/../../.."
OLD_REV=ca21d0b SHM_OPS="neighbors alltoallv" TCP_OPS="allreduce sendrecv barrier alltoall alltoallv neighbors" \
  exec bash bench/lat_ab.sh "${1:-/tmp/ab42.tsv}" "${2:-4}"
