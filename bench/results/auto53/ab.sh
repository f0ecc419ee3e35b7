#!/bin/bash
# auto with algo_tune model (the default) against online, in alternating launches
# (BENCHMARKS.md, "Speed", 46): AllReduce float32 sum, out of place, blocking calls.
#     bash bench/results/auto53/ab.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
go build -o bench/bin/goccl ./cmd/goccl
R=${1:-8}
D=bench/results/auto53
export AB='{"model":{},"online":{"GOCCL_ALGO_TUNE":"online"}}' OOP=1 EXTRA="-z 2"
python3 bench/ab.py 2 shm "$R" 256K:400 1M:200 4M:60 16M:20 64M:8 | tee "$D/ab-shm-2.txt"
python3 bench/ab.py 3 shm "$R" 512K:200 1M:100 2M:60 4M:40 8M:20 32M:10 | tee "$D/ab-shm-3.txt"
python3 bench/ab.py 4 shm "$R" 64K:1000 128K:500 256K:400 1M:100 4M:40 | tee "$D/ab-shm-4.txt"
python3 bench/ab.py 4 tcp "$R" 256K:200 1M:60 2M:40 4M:20 | tee "$D/ab-tcp-4.txt"
