#!/bin/bash
# ddp_vs_torch.sh - goccl train (DDP and ZeRO 1/2/3) beside PyTorch 1.13 DDP (gloo, CPU),
# same model shape and batch, measured in the same run.
#
#   bash bench/ddp_vs_torch.sh [STEPS] [WORLDS]      (defaults: 20 steps, worlds "2 4"; ~5 min)
#
# Model: MLP 1024 -> 4 x Linear(1024,1024), ReLU between, batch 64 per rank, float32
# (4,198,400 parameters, 16.8 MB of gradients). PyTorch: ../shared/bench/peers/torch_gloo.py
# ddp (MSE loss, SGD), one thread per process, OpenBLAS (LD_LIBRARY_PATH=openblas-pthread),
# exposed communication = ddp_step - no_sync step. goccl: `goccl train --np W --bench`
# (softmax cross-entropy over 1024 classes, AdamW), processes started by internal/launch;
# exposed = step - no-sync step for DDP (the same method), and for every stage the time the
# training loop was blocked on communication, measured inside dp. Medians; slowest rank.
# Needs Debian's torch: apt-get install -y python3-torch libopenblas0-pthread
# Columns: step_ms, nosync_ms, exposed_ms = step - no-sync, exposed_frac = exposed/step;
# comm_ms = PyTorch: a bare all_reduce of all gradients; goccl: time the communicator was
# busy with the step's collectives; blocked_ms/_frac and hidden (goccl only) are measured
# inside dp (time the loop waited on communication; 1 - blocked/comm).
# Output: a TSV on stdout and in bench/ddp_vs_torch.tsv.
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-20}
WORLDS=${2:-"2 4"}
PEERS=../shared/bench/peers
PY=/usr/bin/python3
OUT=bench/ddp_vs_torch.tsv
BIN=$(mktemp -d)/goccl
trap 'rm -rf "$(dirname "$BIN")"' EXIT
go build -o "$BIN" ./cmd/goccl || exit 1
have_torch=1
if ! $PY -c 'import torch' 2>/dev/null; then
  echo "ddp_vs_torch: $PY has no torch (apt-get install -y python3-torch libopenblas0-pthread); goccl rows only" >&2
  have_torch=0
fi
OBLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread
{
  echo -e "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), GOMAXPROCS=${GOMAXPROCS:-default}, steps=$STEPS"
  echo -e "impl\tworld\tstage\tstep_ms\tnosync_ms\texposed_ms\texposed_frac\tcomm_ms\tblocked_ms\tblocked_frac\thidden"
  for w in $WORLDS; do
    if [[ $have_torch == 1 ]]; then
      line=$(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 LD_LIBRARY_PATH=$OBLAS timeout 600 \
        $PY $PEERS/torch_gloo.py ddp --world "$w" --threads 1 --steps "$STEPS" --warmup 5 | grep SUMMARY)
      # ddp_ms=.. nosync_ms=.. exposed_comm_ms=.. exposed_comm_frac=.. bare_allreduce_ms=..
      get() { sed -n "s/.*\t$1=\([^\t]*\).*/\1/p" <<<"$line"; }
      echo -e "torch_ddp_gloo\t$w\t0\t$(get ddp_ms)\t$(get nosync_ms)\t$(get exposed_comm_ms)\t$(get exposed_comm_frac)\t$(get bare_allreduce_ms)\t-\t-\t-"
    fi
    for z in 0 1 2 3; do
      line=$(timeout 900 "$BIN" train --np "$w" --zero "$z" --dims 1024,1024,1024,1024,1024 --batch 64 \
        --steps "$STEPS" --warmup 3 --lr 1e-4 --bench --tsv | grep goccl_train)
      get() { sed -n "s/.*\t$1=\([^\t]*\).*/\1/p" <<<"$line"; }
      diff="$(get nosync_ms)\t$(get exposed_diff_ms)\t$(get exposed_diff_frac)"
      [[ $z != 0 ]] && diff="-\t-\t-" # no-sync timing is DDP only
      echo -e "goccl_train\t$w\t$z\t$(get step_ms)\t$diff\t$(get comm_ms)\t$(get exposed_ms)\t$(get exposed_frac)\t$(get hidden)"
    done
  done
} | tee "$OUT"
