#!/bin/bash
# allreduce.sh - goccl perf all_reduce (float32 sum, 8 B..128 MiB, 2 and 4 ranks, shm and tcp,
# every algorithm) beside Open MPI 4.1 (btl vader and tcp) and PyTorch 1.13 gloo, all measured
# in one run on this machine, then the tables for BENCHMARKS.md.
#
# Re-run from a clean clone (as root; installs the peers with apt when missing):
#     bash bench/allreduce.sh [OUTDIR]        # default bench/results/<UTC time>, ~30 min on 2 cores
# Run nothing else meanwhile: every benchmark uses both cores.
#
# Two ranges per configuration, as the peers' anchors were taken: 8 B..1 MiB with 200 timed
# iterations (latency-bound sizes need many), 2 MiB..128 MiB with 10. Every tool times the
# same way: warm-up, barrier, back-to-back blocking calls (goccl perf -z 2), mean time per
# call averaged over ranks, busbw = algbw * 2(n-1)/n, and one checked call per size
# (#wrong must be 0).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT" bench/bin
SMALL=(8 1048576 200 20)         # min max iters warmup
LARGE=(2097152 134217728 10 2)

echo "== building goccl" >&2
go build -o bench/bin/goccl ./cmd/goccl || exit 1
need=()
command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null || need+=(openmpi-bin libopenmpi-dev)
/usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch)
if ((${#need[@]})); then
  echo "== installing ${need[*]}" >&2
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" || exit 1
fi
mpicc.openmpi -O2 -o bench/bin/mpi_allreduce bench/mpi_allreduce.c || exit 1
go build -o bench/bin/membw ./bench/membw || exit 1

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "kernel: $(uname -sr)"
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|L3|NUMA node\(s\))' | sed 's/  */ /g'
  grep MemTotal /proc/meminfo
  go version
  mpirun.openmpi --version 2>&1 | head -1
  /usr/bin/python3 -c 'import torch; print("torch", torch.__version__)' 2>&1
  echo; bench/bin/goccl info
} > "$OUT/machine.txt" 2>&1

echo "== two-thread copy bandwidth (the memory bound)" >&2
bench/bin/membw > "$OUT/membw.txt" || exit 1

. bench/peer_env.sh # PEER_MALLOC: Open MPI measured at its best
MPIRUN=(timeout 900 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none "${PEER_MALLOC[@]}")
for np in 2 4; do
  for r in small large; do
    if [[ $r == small ]]; then R=("${SMALL[@]}"); else R=("${LARGE[@]}"); fi
    echo "== goccl np=$np $r" >&2
    timeout 1800 bench/bin/goccl perf all_reduce --np $np --transport shm,tcp --algo auto,ring,tree,naive \
      -b "${R[0]}" -e "${R[1]}" -f 2 -n "${R[2]}" -w "${R[3]}" -z 2 -c 1 --plot "$OUT/goccl_np${np}_$r.png" \
      > "$OUT/goccl_np${np}_$r.txt" 2> "$OUT/goccl_np${np}_$r.err"
    echo "== Open MPI vader np=$np $r" >&2
    "${MPIRUN[@]}" -np $np --mca btl self,vader bench/bin/mpi_allreduce "${R[@]}" > "$OUT/mpi_vader_np${np}_$r.tsv"
    echo "== Open MPI tcp np=$np $r" >&2
    "${MPIRUN[@]}" -np $np --mca btl self,tcp --mca btl_tcp_if_include lo bench/bin/mpi_allreduce "${R[@]}" > "$OUT/mpi_tcp_np${np}_$r.tsv"
    echo "== gloo np=$np $r" >&2
    OMP_NUM_THREADS=1 timeout 900 /usr/bin/python3 bench/gloo_allreduce.py $np "${R[@]}" > "$OUT/gloo_np${np}_$r.tsv"
  done
done
python3 bench/summarize.py "$OUT" > "$OUT/tables.md"
echo "== tables in $OUT/tables.md" >&2
