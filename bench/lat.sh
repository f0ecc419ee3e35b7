#!/bin/bash
# lat.sh - small blocking operations, goccl (bench/lat) against Open MPI 4.1
# (bench/mpi_lat.c), as medians of REPS interleaved rounds: an 8-byte AllReduce, an
# 8-byte SendRecv to the next rank from the previous, a Barrier, and at 2 ranks an 8-byte
# ping-pong (a Send and a Recv on each side, one round trip per call), over shm against
# vader and over tcp against Open MPI's tcp BTL, at 2, 3 and 4 ranks (BENCHMARKS.md,
# "Speed", 34). Every launch checks one more call's values at the end and fails on a
# wrong one.
#
#     bash bench/lat.sh [OUTDIR] [REPS]     # as root, from a clean clone; ~2 min per round
#
# NP="2 3 4" picks the world sizes, OPS="allreduce sendrecv barrier pingpong" the
# operations (also broadcast from rank 0, in place; reduce, gather and scatter to or
# from rank 0, and allgather, reducescatter and alltoall: blocks of two float32 per
# rank, out of place; alltoallv, the AllToAll through AllToAllV and MPI_Alltoallv with
# equal counts; neighbors, a BatchSendRecv to and from both ring neighbours against
# MPI_Isend/MPI_Irecv/MPI_Waitall), TRANSPORTS="shm tcp" the transports, COUNT the
# float32 elements per message or block (2), ITERS="N WARM" the calls per launch. Writes OUTDIR/lat.tsv (tool, transport, ranks, op, round, us per call) and
# prints OUTDIR/lat.md. Run nothing else meanwhile.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/lat-$(date -u +%Y%m%dT%H%M%SZ)}
REPS=${2:-3}
mkdir -p "$OUT" bench/bin
go build -o bench/bin/goccl ./cmd/goccl || exit 1
go build -o bench/bin/lat ./bench/lat || exit 1
. bench/host.sh
host_record "$OUT" || exit 1
if ! command -v mpirun.openmpi >/dev/null || ! command -v mpicc.openmpi >/dev/null; then
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openmpi-bin libopenmpi-dev || exit 1
fi
mpicc.openmpi -O2 -o bench/bin/mpi_lat bench/mpi_lat.c || exit 1
. bench/peer_env.sh
MPIRUN=(timeout 600 mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none "${PEER_MALLOC[@]}")
TSV="$OUT/lat.tsv"
echo -e "tool\ttransport\tranks\top\tround\ttime_us" > "$TSV"
# Calls and warm-up per launch: over shm at 2 ranks a call is about 0.5 us and the
# warm-up is long for every tool (headline.sh says why); at 3 and 4 ranks on 2 cores and
# over tcp a call is 10-100 us.
iters() { # transport ranks
  if [[ -n ${ITERS:-} ]]; then echo "$ITERS"; return; fi
  if [[ $1 == shm && $2 == 2 ]]; then echo "100000 20000"; elif [[ $1 == shm ]]; then echo "20000 2000"; else echo "5000 500"; fi
}
fail=0
for round in $(seq "$REPS"); do
  echo "== round $round/$REPS" >&2
  for np in ${NP:-2 3 4}; do
    for tr in ${TRANSPORTS:-shm tcp}; do
      read -r n warm < <(iters $tr $np)
      btl=(--mca btl self,vader)
      [[ $tr == tcp ]] && btl=(--mca btl self,tcp --mca btl_tcp_if_include lo)
      for op in ${OPS:-allreduce sendrecv barrier pingpong}; do
        [[ $op == pingpong && $np != 2 ]] && continue
        if ! g=$(GOCCL_TRANSPORT=$tr timeout 600 bench/bin/goccl run -n $np -- bench/bin/lat -op $op -count ${COUNT:-2} -n $n -warm $warm 2>&1); then
          echo "goccl $tr $np $op: $g" >&2; fail=1
        fi
        if ! m=$("${MPIRUN[@]}" -np $np "${btl[@]}" bench/bin/mpi_lat $op ${COUNT:-2} $n $warm 2>&1); then
          echo "Open MPI $tr $np $op: $m" >&2; fail=1
        fi
        peer=vader
        [[ $tr == tcp ]] && peer="Open MPI tcp"
        echo "$g" | awk -v tr=$tr -v np=$np -v op=$op -v r=$round '/us\/op/ {print "goccl\t"tr"\t"np"\t"op"\t"r"\t"$(NF-1)}' >> "$TSV"
        echo "$m" | awk -v p="$peer" -v tr=$tr -v np=$np -v op=$op -v r=$round '/us\/op/ {print p"\t"tr"\t"np"\t"op"\t"r"\t"$(NF-1)}' >> "$TSV"
      done
    done
  done
done
python3 - "$TSV" > "$OUT/lat.md" <<'PY'
import statistics, sys
from collections import defaultdict
pts = defaultdict(list)
for line in open(sys.argv[1]).read().splitlines()[1:]:
    tool, tr, np, op, r, t = line.split("\t")
    pts[(tool, tr, int(np), op)].append(float(t))
rounds = max(len(v) for v in pts.values())
print(f"Medians over {rounds} interleaved rounds, us per call (a ping-pong's call is a round trip); every launch checked its values.\n")
print("| op | ranks | shm: goccl | vader | ratio | tcp: goccl | Open MPI tcp | ratio |")
print("|---|---:|---|---|---|---|---|---|")
ops = ["allreduce", "sendrecv", "barrier", "pingpong", "broadcast", "reduce", "gather", "scatter", "allgather",
       "reducescatter", "alltoall", "alltoallv", "neighbors"]
for op in ops:
    for np in sorted({k[2] for k in pts}):
        cells = []
        for tr, peer in (("shm", "vader"), ("tcp", "Open MPI tcp")):
            g, v = pts.get(("goccl", tr, np, op)), pts.get((peer, tr, np, op))
            if not g or not v:
                cells += ["-", "-", "-"]
                continue
            a, b = statistics.median(g), statistics.median(v)
            mark = "**" if a > b else ""
            cells += [f"{mark}{a:.2f}{mark}", f"{b:.2f}", f"{a/b:.2f}x"]
        if any(c != "-" for c in cells):
            print(f"| {op} | {np} | " + " | ".join(cells) + " |")
print("\n** marks goccl slower. Every sample:\n")
for k in sorted(pts):
    print(f"- {k[0]} {k[1]} {k[2]} ranks {k[3]}: " + " ".join(f"{x:.2f}" for x in pts[k]))
PY
cat "$OUT/lat.md"
exit $fail
