#!/usr/bin/env bash
# gpu-check.sh: the real-hardware check for goccl's nccl transport and for training on
# the device (issues 7 and 8), for a lent
# GPU machine that has no Go toolchain and no network. It uses a goccl binary built
# elsewhere (GOCCL_BIN, else ./bin/goccl, else ./goccl; built with `go build` only if Go
# happens to exist), finds NCCL and the CUDA runtime in python3's site-packages (pip
# wheels), prints driver/CUDA/NCCL versions and runs the nccl-tests-style sweeps below,
# writing every table to $OUT (default ./gpu-check-out). Budget: GPU_CHECK_BUDGET seconds
# (default 420) for the whole script on one H200; every step has its own timeout, cut to
# what is left of the budget, so one hang cannot eat the rest, and a step that would start
# with under 15 s left is skipped and says so. The steps most worth having come first.
# It exits 0 when every step passed. Through the device tool, which brings back at most 8
# files, run it with OUT=/tmp/gc and tar that folder into the tool's $OUT (BENCHMARKS.md,
# "GPU", has the command and the results of the first runs on an H200).
#
# Build the binaries on the dev machine first (stripped: they travel to the GPU machine):
#   CGO_ENABLED=1 go build -ldflags='-s -w' -o bin/goccl ./cmd/goccl
#   for p in nccl/kernels nccl/nvrtc nccl/cublas; do CGO_ENABLED=1 go test -c -ldflags='-s -w' -o bin/$(basename $p).test ./$p; done
#   CGO_ENABLED=1 go test -c -ldflags='-s -w' -o bin/dpcuda.test ./dp/cuda
#   CGO_ENABLED=1 go build -ldflags='-s -w' -o bin/rankprog ./e2e/rankprog
set -u -o pipefail

OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
fails=0
BUDGET=${GPU_CHECK_BUDGET:-420}
T0=$SECONDS

say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }

# --- the binary ---------------------------------------------------------------------
GOCCL=${GOCCL_BIN:-}
if [ -z "$GOCCL" ]; then
	for c in ./bin/goccl ./goccl; do
		if [ -x "$c" ]; then GOCCL=$c; break; fi
	done
fi
if [ -z "$GOCCL" ] && command -v go >/dev/null 2>&1; then
	say "building goccl with $(go version)"
	CGO_ENABLED=1 go build -o "$OUT/goccl" ./cmd/goccl && GOCCL=$OUT/goccl
fi
if [ -z "$GOCCL" ]; then
	say "FAIL: no goccl binary (set GOCCL_BIN or carry bin/goccl)"
	exit 1
fi
say "goccl binary: $GOCCL ($(date -u +%FT%TZ), $(nproc) CPUs)"

# limit <seconds>: the step's timeout, cut to what is left of the budget; prints 0 when
# under 15 s are left (the step is skipped).
limit() {
	local left=$((BUDGET - (SECONDS - T0)))
	if [ "$left" -lt 15 ]; then echo 0; elif [ "$1" -gt "$left" ]; then echo "$left"; else echo "$1"; fi
}
skipped() { say "== $1: SKIP (the budget of ${BUDGET}s is spent)"; }

# --- libraries from pip wheels --------------------------------------------------------
sites=$(python3 - <<'PY' 2>/dev/null
import site, sys
dirs = list(site.getsitepackages()) + [site.getusersitepackages()] + [p for p in sys.path if p.endswith("-packages")]
seen = []
for d in dirs:
    if d not in seen:
        seen.append(d)
print("\n".join(seen))
PY
)
find_lib() { # find_lib <relative path>...: first existing file under any site-packages
	local rel d
	for rel in "$@"; do
		while IFS= read -r d; do
			[ -n "$d" ] && [ -f "$d/$rel" ] && { printf '%s\n' "$d/$rel"; return 0; }
		done <<<"$sites"
	done
	return 1
}
NCCL_LIB=${GOCCL_NCCL_LIB:-$(find_lib nvidia/nccl/lib/libnccl.so.2 || true)}
CUDA_LIB=${GOCCL_CUDA_LIB:-$(find_lib nvidia/cu13/lib/libcudart.so.13 nvidia/cuda_runtime/lib/libcudart.so.12 || true)}
say "site-packages: $(echo "$sites" | tr '\n' ' ')"
say "libnccl:   ${NCCL_LIB:-not found (falling back to the system library path)}"
say "libcudart: ${CUDA_LIB:-not found (falling back to the system library path)}"
export GOCCL_NCCL_LIB=$NCCL_LIB GOCCL_CUDA_LIB=$CUDA_LIB
for l in "$NCCL_LIB" "$CUDA_LIB"; do
	[ -n "$l" ] && LD_LIBRARY_PATH=$(dirname "$l")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
NVRTC_LIB=${GOCCL_CUDA_NVRTC:-$(find_lib nvidia/cu13/lib/libnvrtc.so.13 nvidia/cuda_nvrtc/lib/libnvrtc.so.12 || true)}
CUBLAS_LIB=${GOCCL_CUDA_CUBLAS:-$(find_lib nvidia/cu13/lib/libcublas.so.13 nvidia/cublas/lib/libcublas.so.12 || true)}
say "libnvrtc:  ${NVRTC_LIB:-not found (falling back to the system library path)}"
say "libcublas: ${CUBLAS_LIB:-not found (falling back to the system library path)}"
export GOCCL_CUDA_NVRTC=$NVRTC_LIB GOCCL_CUDA_CUBLAS=$CUBLAS_LIB

# --- versions -------------------------------------------------------------------------
{
	echo "== nvidia-smi"
	timeout 15 nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total,driver_version --format=csv || echo "nvidia-smi failed"
	timeout 15 nvidia-smi topo -m || true
	echo "== library versions (ctypes)"
	NCCL_LIB=$NCCL_LIB CUDA_LIB=$CUDA_LIB timeout 30 python3 - <<'PY' || echo "version probe failed"
import ctypes, os
v = ctypes.c_int()
if os.environ.get("CUDA_LIB"):
    rt = ctypes.CDLL(os.environ["CUDA_LIB"])
    rt.cudaRuntimeGetVersion(ctypes.byref(v)); print("cuda runtime", v.value)
    rt.cudaDriverGetVersion(ctypes.byref(v)); print("cuda driver ", v.value)
if os.environ.get("NCCL_LIB"):
    n = ctypes.CDLL(os.environ["NCCL_LIB"])
    n.ncclGetVersion(ctypes.byref(v)); print("nccl        ", v.value)
PY
	echo "== goccl info"
	timeout 30 "$GOCCL" info || echo "goccl info failed"
} 2>&1 | tee "$OUT/versions.txt"

# --- runs -----------------------------------------------------------------------------
# run <name> <timeout-seconds> <goccl args...>: the table goes to $OUT/<name>.txt.
run() {
	local name=$1 lim
	lim=$(limit "$2")
	shift 2
	if [ "$lim" -eq 0 ]; then skipped "$name"; return 1; fi
	say "== $name: goccl $*"
	local start=$SECONDS rc
	timeout --kill-after=5 "$lim" "$GOCCL" "$@" >"$OUT/$name.txt" 2>&1
	rc=$?
	tail -n 4 "$OUT/$name.txt" | sed 's/^/   /' | tee -a "$SUMMARY"
	if [ "$rc" -ne 0 ]; then
		fails=$((fails + 1))
		say "   FAIL rc=$rc after $((SECONDS - start))s"
		return 1
	fi
	say "   ok in $((SECONDS - start))s"
}

dev=(--device cuda)
export NCCL_DEBUG=${NCCL_DEBUG:-WARN} # NCCL says why when it refuses something
export NVIDIA_TF32_OVERRIDE=0         # fp32 products stay fp32: the CPU comparisons below assume it

# 1. NCCL's own AllReduce, one rank: the number to put beside nccl-tests.
run allreduce-nccl-1rank 60 perf all_reduce --np 1 -b 8 -e 1G -f 4 "${dev[@]}" --transport nccl --algo nccl

# 2. The kernel, NVRTC, cuBLAS and dp/cuda tests against the real libraries
# (GOCCL_GPU_CHECK=1: the same tests that run on the fakes at home, at larger sizes),
# each in its package's directory as `go test` runs it.
gotest() { # gotest <binary name> <package dir>
	local t=$1 pkg=$2 bin="" lim d
	for d in "${GOCCL_TEST_BIN_DIR:-$PWD/bin}" "$PWD"; do [ -x "$d/$t.test" ] && { bin=$d/$t.test; break; }; done
	if [ -z "$bin" ]; then
		say "== go test $t: SKIP (bin/$t.test not built)"
		return
	fi
	lim=$(limit 90)
	if [ "$lim" -eq 0 ]; then skipped "go test $t"; return; fi
	say "== go test $t (real GPU): $bin"
	local start=$SECONDS rc
	(cd "$pkg" 2>/dev/null || true; GOCCL_GPU_CHECK=1 timeout --kill-after=5 "$lim" "$bin" -test.v -test.count=1 -test.timeout="$((lim - 2))s") >"$OUT/gotest-$t.txt" 2>&1
	rc=$?
	grep -E '^(--- (FAIL|SKIP)|ok|FAIL|PASS)|max \||panic' "$OUT/gotest-$t.txt" | head -n 20 | sed 's/^/   /' | tee -a "$SUMMARY"
	if [ "$rc" -ne 0 ]; then fails=$((fails + 1)); say "   FAIL rc=$rc after $((SECONDS - start))s"; else say "   ok in $((SECONDS - start))s"; fi
}
gotest kernels nccl/kernels
gotest nvrtc nccl/nvrtc
gotest cublas nccl/cublas
gotest dpcuda dp/cuda

# 3. Training on the device (issue 8). train_vs_cpu <zero>: 300 steps on two ranks
# sharing GPU 0 (goroutine ranks of one process, device buffers staged for the inmem
# transport) against the same two ranks on the CPU, same seed. The kernels (casts, AdamW, bias, ReLU, softmax cross-entropy, column
# sums) match the host code bit for bit (tests above); only cuBLAS sums each dot product
# in another order than gonum. fp32 training is reproducible only up to that order: at
# step 1 only the forward products differ, by at most k*2^-24 relative (k <= 512: 3e-5),
# so the first loss must agree to the printed 4 decimals (1e-4); afterwards Adam and the
# ReLUs amplify the difference. Measured at home with this exact configuration, the fake
# cuBLAS (sequential order) against gonum: |diff| 6e-4 at step 25, <= 1.1e-3 up to step
# 125, 9.5e-3 at most over 300 steps (1% of the loss). A GPU is a third summation order,
# so the bounds are about 3x those: 1e-4 at step 1, 2e-3 up to step 50, 3e-2 over all
# 300. A wrong gradient, cast or optimizer step shows up far beyond them within the
# first 25 steps.
train_vs_cpu() { # train_vs_cpu <zero> [<label> <goccl args that launch 2 ranks of train>...]
	local z=$1 label=${2:-} launch=("${@:3}")
	local args=(--zero "$z" --steps 300 --warmup 5 --log-every 25 --dims 256,512,512,10 --batch 32 --lr 0.001 --seed 7)
	local cpu=$OUT/train-zero$z-cpu.txt name=train-zero$z${label:+-$label} lim
	[ "${#launch[@]}" -gt 0 ] || launch=(train --local 2)
	lim=$(limit 60)
	if [ "$lim" -eq 0 ]; then skipped "$name"; return; fi
	say "== $name: goccl ${launch[*]} ${args[*]} --device cuda vs cpu"
	if [ -z "$label" ]; then
		timeout --kill-after=5 "$lim" "$GOCCL" train --local 2 "${args[@]}" --device cpu >"$cpu" 2>&1 || { fails=$((fails + 1)); say "   FAIL: cpu run"; tail -n 3 "$cpu" | tee -a "$SUMMARY"; return; }
		lim=$(limit 60)
		if [ "$lim" -eq 0 ]; then skipped "$name on cuda"; return; fi
	fi
	[ "$label" = nccl ] && export GOCCL_TRANSPORT=nccl GOCCL_ALGO=nccl
	timeout --kill-after=5 "$lim" "$GOCCL" "${launch[@]}" "${args[@]}" --device cuda >"$OUT/$name-cuda.txt" 2>&1
	local rc=$?
	unset GOCCL_TRANSPORT GOCCL_ALGO
	if [ "$rc" -ne 0 ]; then fails=$((fails + 1)); say "   FAIL: cuda run"; tail -n 3 "$OUT/$name-cuda.txt" | tee -a "$SUMMARY"; return; fi
	awk '
		FNR == 1 { f++ }
		/^ +[0-9]+ +[0-9.]+ / { if (f == 1) cpu[$1] = $2; else { gpu[$1] = $2; step[$1] = $3; comm[$1] = $4 } }
		/^[0-9]+ +[0-9.]+ MiB/ { if (f == 2) { rows++; if ($10 != $14) bad = bad " rank " $1 ": total " $10 " MiB vs formula " $14 " MiB" } }
		END {
			for (s in gpu) { n++; if (!(s in cpu)) { print "step " s " missing from the cpu run"; exit 1 }
				d = gpu[s] - cpu[s]; if (d < 0) d = -d; if (d > max) max = d
				bound = s + 0 == 1 ? 1.5e-4 : (s + 0 <= 50 ? 2e-3 : 3e-2)
				if (d > bound) over = over " step " s
				printf "step %4d cpu %s cuda %s |diff| %.4f (bound %g) cuda step_ms %s comm_ms %s\n", s, cpu[s], gpu[s], d, bound, step[s], comm[s] }
			printf "max |loss diff| %.4f over %d logged steps%s; memory rows %d%s\n", max, n, over == "" ? " (within bounds)" : ", OVER BOUND at" over, rows, bad
			exit !(n > 0 && over == "" && rows == 2 && bad == "")
		}' "$cpu" "$OUT/$name-cuda.txt" >"$OUT/$name-compare.txt"
	rc=$?
	tail -n 1 "$OUT/$name-compare.txt" | sed 's/^/   /' | tee -a "$SUMMARY"
	grep -E '^# (median|device|transport)' "$OUT/$name-cuda.txt" | sed 's/^/   /' | tee -a "$SUMMARY"
	if [ "$rc" -ne 0 ]; then fails=$((fails + 1)); say "   FAIL"; else say "   ok"; fi
}
train_vs_cpu 0
train_vs_cpu 3

# 4. Our ring over shm with device buffers staged through pinned memory, 2 ranks on the
# one GPU: the sweep, then every dtype and op checked (-c 1).
run allreduce-ring-over-shm-staged-2rank 60 perf all_reduce --np 2 -b 8 -e 256M -f 4 "${dev[@]}" --transport shm --algo ring
run all-dtypes-ops-shm-staged-2rank 60 perf all_reduce --np 2 -b 8 -e 1M -f 32 -d all -o all -c 1 "${dev[@]}" --transport shm --algo ring

# 5. Every dtype and op through NCCL's AllReduce at one rank, checked.
run all-dtypes-ops-nccl-1rank 45 perf all_reduce --np 1 -b 8 -e 1M -f 32 -d all -o all -c 1 "${dev[@]}" --transport nccl --algo nccl

# 6. Two ranks on the one GPU through NCCL. NCCL before 2.30 refuses two ranks on one
# device ("Duplicate GPU detected", ncclInvalidUsage); 2.30+ allows it with
# NCCL_MULTI_RANK_GPU_ENABLE=1. Where that is refused, the two ranks pose as two hosts
# (goccl run --host-id, which the nccl transport passes on as NCCL_HOSTID), so NCCL
# connects them with its socket transport, as it would two machines: every byte then
# crosses host memory, so the 2-rank times below measure that path, not NVLink or P2P.
two=() twotrain=() tworun=()
if NCCL_MULTI_RANK_GPU_ENABLE=1 run nccl-2rank-probe-multirank 45 perf all_reduce --np 2 -b 8 -e 64K -f 8 -c 1 "${dev[@]}" --transport nccl --algo nccl; then
	export NCCL_MULTI_RANK_GPU_ENABLE=1
	two=(perf --np 2) twotrain=(train --np 2) tworun=(run -n 2 --no-prefix --)
	say "   (2 ranks: NCCL_MULTI_RANK_GPU_ENABLE=1 on one GPU)"
elif run nccl-2rank-probe-hosts 45 run -n 2 --host-id gpu-a,gpu-b --no-prefix -- "$GOCCL" perf all_reduce -b 8 -e 64K -f 8 -c 1 "${dev[@]}" --transport nccl --algo nccl; then
	two=(run -n 2 --host-id gpu-a,gpu-b --no-prefix -- "$GOCCL" perf)
	twotrain=(run -n 2 --host-id gpu-a,gpu-b --no-prefix -- "$GOCCL" train)
	tworun=(run -n 2 --host-id gpu-a,gpu-b --no-prefix --)
	fails=$((fails - 1)) # the multi-rank probe's refusal is the NCCL version, not a failure
	say "   (2 ranks: posing as two hosts; NCCL refuses two ranks on one GPU, see nccl-2rank-probe-multirank.txt)"
fi
if [ "${#two[@]}" -gt 0 ]; then
	run allreduce-nccl-2rank 60 "${two[@]}" all_reduce -b 8 -e 256M -f 4 "${dev[@]}" --transport nccl --algo nccl
	# Our ring over NCCL point-to-point.
	run allreduce-ring-over-nccl-2rank 60 "${two[@]}" all_reduce -b 8 -e 64M -f 4 -n 5 -w 1 "${dev[@]}" --transport nccl --algo ring
	# Checked sweeps: two ranks that share one GPU take milliseconds per call (their
	# kernels time-slice), so each size runs twice after one warm-up.
	run all-dtypes-ops-nccl-2rank 45 "${two[@]}" all_reduce -b 8 -e 1M -f 32 -d all -o all -c 1 -n 2 -w 1 "${dev[@]}" --transport nccl --algo nccl
	run all-dtypes-ops-ring-over-nccl-2rank 45 "${two[@]}" all_reduce -b 8 -e 1M -f 32 -d all -o all -c 1 -n 2 -w 1 "${dev[@]}" --transport nccl --algo ring
	# The other collectives through NCCL, checked.
	for coll in all_gather reduce_scatter broadcast reduce alltoall; do
		run "$coll-nccl-2rank" 30 "${two[@]}" "$coll" -b 8 -e 16M -f 16 -c 1 -n 5 -w 1 "${dev[@]}" --transport nccl --algo nccl
	done
	# Training with its collectives through NCCL (issue 8's one rank per GPU, two
	# "hosts" here), against the CPU runs of step 3.
	for z in 0 3; do
		train_vs_cpu "$z" nccl "${twotrain[@]}"
	done
	# AllToAllV through NCCL's grouped calls (and, with it, the counts' AllGather) and
	# BatchSendRecv over NCCL point-to-point links, every byte checked (e2e's rank
	# program, host buffers staged through the device; not yet run on a GPU).
	if [ -x bin/rankprog ]; then
		GOCCL_TRANSPORT=nccl run p2p-nccl-2rank 40 "${tworun[@]}" bin/rankprog -mode p2p
	else
		say "== p2p-nccl-2rank: SKIP (bin/rankprog not built)"
	fi
else
	say "   (two ranks on one GPU through NCCL did not run: see the probes; the 2-rank NCCL steps are skipped)"
fi
unset NCCL_MULTI_RANK_GPU_ENABLE

# 7. The other collectives at one rank through NCCL, checked (what runs on one GPU
# whatever the NCCL version).
for coll in all_gather reduce_scatter broadcast reduce alltoall; do
	run "$coll-nccl-1rank" 20 perf "$coll" --np 1 -b 8 -e 16M -f 16 -c 1 "${dev[@]}" --transport nccl --algo nccl
done

# 8. The same library called from PyTorch at one rank, for the per-call overhead
# beside step 1 (out-of-place, CUDA events, 20 iterations after 5 warm-ups).
lim=$(limit 60)
if [ "$lim" -gt 0 ] && python3 -c 'import torch' 2>/dev/null; then
	say "== torch.distributed nccl all_reduce, 1 rank"
	MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 timeout --kill-after=5 "$lim" python3 - >"$OUT/torch-nccl-1rank.txt" 2>&1 <<'PY'
import torch, torch.distributed as dist
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
print("# torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))
print("#       size     time(us)   algbw(GB/s)")
n = 8
while n <= 1 << 30:
    x = torch.ones(max(n // 4, 1), device="cuda")
    for _ in range(5):
        dist.all_reduce(x)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        dist.all_reduce(x)
    e.record(); torch.cuda.synchronize()
    us = s.elapsed_time(e) * 1e3 / 20
    print("%12d %12.2f %12.2f" % (n, us, n / us / 1e3))
    n *= 4
# A world of one: in-place AllReduce is no work, so the times above are the call's
# cost; all_gather_into_tensor is NCCL's out-of-place copy, beside a plain device copy,
# for goccl's out-of-place column.
print("#       size  allgather(us)  copy_(us)")
for n in (8, 1 << 20, 32 << 20, 128 << 20, 512 << 20):
    x = torch.ones(max(n // 4, 1), device="cuda"); y = torch.empty_like(x)
    row = []
    for f in (lambda: dist.all_gather_into_tensor(y, x), lambda: y.copy_(x)):
        for _ in range(5):
            f()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            f()
        e.record(); torch.cuda.synchronize()
        row.append(s.elapsed_time(e) * 1e3 / 20)
    print("%12d %14.2f %10.2f" % (n, row[0], row[1]))
dist.destroy_process_group()
PY
	tail -n 8 "$OUT/torch-nccl-1rank.txt" | sed 's/^/   /' | tee -a "$SUMMARY"
else
	say "== torch.distributed nccl: SKIP (no torch, or the budget is spent)"
fi

say "== done in $((SECONDS - T0))s: $fails failing step(s); tables in $OUT"
[ "$fails" -eq 0 ]
