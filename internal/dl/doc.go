// Package dl finds and opens shared libraries at run time (dlopen/dlsym), so goccl can
// use NCCL, the CUDA runtime, NVRTC and cuBLAS where they exist and still build and run
// where they do not.
//
// Two halves: Spec.Candidates (pure Go, every platform) turns a library description
// into the ordered list of places to try — an explicit path from config, the system
// library path (plain dlopen of the soname, which honours LD_LIBRARY_PATH, RUNPATH and
// ld.so.cache), the directories pip wheels install into under every Python
// site-packages root, and a few well-known toolkit directories. Open (linux && cgo)
// tries them in order and returns the first that loads; when none does, its error wraps
// transport.ErrNotSupported and lists every place it looked and why each failed.
//
// Symbols are returned as uintptr function addresses: Go cannot call C function
// pointers, so each caller casts them inside its own C trampoline with the exact
// prototype. dlopen, dlsym and dlerror run with the OS thread locked, because dlerror
// is per thread.
//
//	lib, err := dl.Open(dl.Spec{Name: "NCCL", Sonames: []string{"libnccl.so.2"},
//		WheelDirs: []string{"nvidia/nccl/lib"}})
//	if err != nil { return err } // errors.Is(err, transport.ErrNotSupported)
//	fn, err := lib.Sym("ncclGetVersion")
//
// A Lib is never closed by its users in practice: unloading NCCL or CUDA while any
// stream or communicator exists is undefined behaviour, so libraries stay loaded for the
// life of the process (as go-nvml and PyTorch do).
package dl
