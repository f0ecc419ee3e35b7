// Package kernels generates, compiles and launches goccl's device kernels: the
// element-wise work of data-parallel training on CUDA memory (casts between float32,
// float16 and bfloat16 with optional scaling and accumulation, the Inf/NaN check and
// loss unscaling of fp16 training, the fused AdamW step, and the example model's bias,
// ReLU, softmax cross-entropy and column sums) and the reductions of goccl's own
// algorithms on device buffers (sum, prod, min, max for every dtype, and avg's
// division).
//
// The kernels are CUDA C++ text built by Source, the same for every process, compiled
// at run time by NVRTC for the GPU's architecture (nccl/nvrtc, cached per process) and
// loaded through the driver API (nccl/cuda's Driver): no nvcc at build time, no CUDA
// headers at run time (16-bit floats travel as bit patterns, converted with the same
// round-to-nearest-even code as algos/reduce and dp). They are written operation for
// operation like the host code they replace and compiled with --fmad=false, so on a
// GPU they give the host's results bit for bit; the tests check exactly that.
//
//	set, err := kernels.Load(dev, drv, nv, kernels.Training) // once per device
//	err = set.AdamW(stream, &kernels.AdamW{N: n, Master: w, M: m, V: v, Grad: g, ...})
//	err = stream.Synchronize(ctx)
//
// Every launch is a one-dimensional grid-stride loop of Block threads per block and at
// most eight blocks per SM, queued on the caller's stream. Without a GPU, Load returns
// the driver's or NVRTC's error, which wraps transport.ErrNotSupported.
//
// Under GOCCL_HOST_SHIM (never defined for NVRTC) Source also emits a host launcher per
// kernel; kerneltest's fake NVRTC and driver use them to run the very same source on
// the CPU where there is no GPU.
package kernels
