#!/bin/bash
# monitor.sh - the VM's phase beside the staged AllReduce and the ring ("Speed", 45d):
# every 25 s, bench/cacheline's one-way line transfer between two processes, then one
# launch each of staged and the ring at 1 MiB over shm, 2 ranks, 400 calls. Runs until
# interrupted; one line per sample on stdout:
#
#     bash bench/results/auto51/monitor.sh > monitor.log     # from a clean clone
set -uo pipefail
cd "$(dirname "$0")/../../.."
mkdir -p bench/bin
go build -o bench/bin/goccl ./cmd/goccl || exit 1
go build -o bench/bin/cacheline ./bench/cacheline || exit 1
perf() { timeout 60 bench/bin/goccl perf all_reduce --np 2 --transport shm "$@" -b 1M -e 1M -n 400 -w 5 -z 2 -c 0 2>/dev/null | awk '/^ +[0-9]/{print $6}'; }
while true; do
  cl=$(bench/bin/cacheline -n 300000 2>&1 | sed -n 's/.*one way \([0-9]*\) ns.*/\1/p')
  st=$(perf --algo staged)
  rg=$(perf --algo ring)
  echo "$(date -u +%H:%M:%S) cacheline_oneway_ns=$cl staged_1M_us=$st ring_1M_us=$rg"
  sleep 25
done
