// Package cuda is a small CUDA runtime binding loaded at run time: no CUDA headers or
// libraries are needed to build it, and a binary that uses it still runs where there is
// no GPU (every entry point then reports an error wrapping transport.ErrNotSupported).
//
// It covers what a collective library and its benchmarks need: device count and
// selection, device memory, pinned host memory, synchronous and asynchronous copies,
// streams, events for timing, and pointer attributes to tell device memory from host
// memory.
//
// CUDA keeps the "current device" per OS thread and goroutines move between threads, so
// every call that depends on it takes its Device and sets it inside the same C call
// (set-and-call) — callers never need runtime.LockOSThread.
//
// Lifetimes: a Runtime is loaded once per library path and lives as long as the process
// (unloading CUDA under live streams is undefined). Device memory, pinned memory,
// streams and events belong to the caller, who frees them. Device pointers are uintptr
// values, never Go pointers; async copies and NCCL must only see device memory or
// pinned host memory, never Go memory.
//
//	rt, err := cuda.Load("") // "" = search; or a path from config (Params "cuda.lib")
//	if err != nil { return err } // errors.Is(err, transport.ErrNotSupported) without CUDA
//	dev, err := rt.Device(0)
//	p, err := dev.Malloc(1 << 20)
//	defer dev.Free(p)
//	err = dev.CopyHtoD(p, data)
//	s, _ := dev.NewStream()
//	start, _ := dev.NewEvent(true)
//	...
//	err = s.Synchronize(ctx) // polls, honours ctx
//
// Where it looks for libcudart: an explicit path, then the system library path
// (libcudart.so.13, .12), then pip wheels under every Python site-packages root
// (nvidia/cu13/lib for CUDA 13, nvidia/cuda_runtime/lib for CUDA 12), then
// $CONDA_PREFIX/lib and /usr/local/cuda/lib64.
//
// Tests run against a fake libcudart built from ../testdata by the tests' TestMain;
// they check goccl's side of the ABI (argument order, per-thread device handling,
// error translation), not CUDA itself.
package cuda
