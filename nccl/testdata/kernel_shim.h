/* Host-compat shim for goccl's generated CUDA kernels (nccl/kernels). The fake
 * libnvrtc compiles the generated source with the host C++ compiler and this header
 * (-include), with GOCCL_HOST_SHIM defined, so that the kernels' host launchers exist;
 * the fake libcuda then runs a launch one "thread" at a time, in block and thread
 * order. It defines exactly the CUDA builtins the generated source uses, so a kernel
 * that reaches for anything else fails to compile here too. Element-wise kernels with
 * grid-stride loops give the same results in any thread order, which is all this
 * emulation relies on. */
#ifndef GOCCL_KERNEL_SHIM_H
#define GOCCL_KERNEL_SHIM_H
#include <math.h>
#include <string.h>

#define __global__
#define __device__
#define __forceinline__ inline

struct goccl_dim3 { unsigned int x, y, z; };
static __thread goccl_dim3 threadIdx, blockIdx, blockDim, gridDim;

static inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }

#define GOCCL_HOST_GRID(g, blk) \
	gridDim = (g); blockDim = (blk); blockIdx.y = blockIdx.z = threadIdx.y = threadIdx.z = 0; \
	for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++) \
		for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++)
#endif
