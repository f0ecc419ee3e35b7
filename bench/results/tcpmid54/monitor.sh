#!/bin/bash
# monitor.sh - the VM's phase beside the tcp mid sizes at 2 ranks ("Speed", 47): every
# 10 s, bench/cacheline's one-way line transfer between two processes, then one launch
# each of goccl's ring, goccl auto and Open MPI's default over tcp at 1 MiB, 2 ranks,
# 100 calls. Runs for SAMPLES samples (default 60); one line per sample on stdout:
#
#     bash bench/results/tcpmid54/monitor.sh > monitor.log     # from a clean clone
set -uo pipefail
cd "$(dirname "$0")/../../.."
mkdir -p bench/bin
go build -o bench/bin/goccl ./cmd/goccl || exit 1
go build -o bench/bin/cacheline ./bench/cacheline || exit 1
mpicc.openmpi -O2 -o bench/bin/mpi_allreduce bench/mpi_allreduce.c || exit 1
. bench/peer_env.sh
perf() { timeout 60 bench/bin/goccl perf all_reduce --np 2 --transport tcp "$@" -b 1M -e 1M -n 100 -w 6 -z 2 -c 0 2>/dev/null | awk '/^ +[0-9]/{print $6}'; }
for _ in $(seq "${SAMPLES:-60}"); do
  cl=$(bench/bin/cacheline -n 300000 2>&1 | sed -n 's/.*one way \([0-9]*\) ns.*/\1/p')
  rg=$(perf --algo ring)
  au=$(perf --algo auto)
  om=$(timeout 60 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none "${PEER_MALLOC[@]}" -np 2 \
    --mca btl self,tcp --mca btl_tcp_if_include lo bench/bin/mpi_allreduce 1048576 1048576 100 6 | awk '{print $2}')
  cl2=$(bench/bin/cacheline -n 300000 2>&1 | sed -n 's/.*one way \([0-9]*\) ns.*/\1/p')
  echo "$(date -u +%H:%M:%S) cacheline_oneway_ns=$cl/$cl2 ring_1M_us=$rg auto_1M_us=$au ompi_1M_us=$om"
  sleep 5
done
