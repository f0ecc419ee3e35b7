// Package cublas is the part of NVIDIA's cuBLAS that goccl's example model needs — a
// handle per device, its stream, and single-precision matrix products — loaded with
// dlopen (libcublas.so.13 or .12) like the CUDA runtime, so goccl builds without the
// toolkit and runs wherever the library is installed.
//
// Only the `_v2` entry points are used (cublasCreate_v2, cublasSetStream_v2,
// cublasSgemm_v2, cublasDestroy_v2): the unsuffixed names in libcublas are the legacy
// handle-less API with different signatures. cuBLAS is column-major, like Fortran; a
// row-major product C = A·B is computed as Cᵀ = Bᵀ·Aᵀ by swapping the operands.
//
// A Handle belongs to the device it was created on. Every call selects that device
// in the same C call, because CUDA's current device is per OS thread. Work is queued
// on the handle's stream (SetStream) and is finished when that stream is.
//
//	bl, err := cublas.Load("")          // errors.Is(err, transport.ErrNotSupported) without it
//	h, err := bl.NewHandle(dev)
//	defer h.Destroy()
//	h.SetStream(s)
//	err = h.Sgemm(cublas.NoTrans, cublas.NoTrans, m, n, k, 1, a, m, b, k, 0, c, m)
package cublas
