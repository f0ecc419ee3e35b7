// Package nvrtc compiles CUDA C++ source to GPU code at run time through NVIDIA's
// runtime compiler, libnvrtc, loaded with dlopen like the CUDA runtime, so goccl's
// device kernels need no nvcc at build time.
//
// Load finds libnvrtc.so.13 or .12 in the same places as libcudart (an explicit path
// from Params "nvrtc.lib", the system library path, the pip wheels' nvidia/cu13/lib and
// nvidia/cuda_nvrtc/lib, /usr/local/cuda) and loads the libnvrtc-builtins library that
// sits next to it, which NVRTC itself would otherwise fail to find (error 7).
// Compile builds a program for one GPU architecture — a CUBIN for the real sm_XX when
// NVRTC can make one (no driver JIT, works under minor-version compatibility), else PTX
// for compute_XX — and caches the result per process, keyed by source, architecture
// and options, so every rank and every engine in a process compiles once.
//
//	nv, err := nvrtc.Load("")          // errors.Is(err, transport.ErrNotSupported) without it
//	prog, err := nv.Compile(src, "goccl_kernels.cu", 90)
//	mod, err := drv.LoadModule(dev, prog.Image)
//
// A compilation failure is a *CompileError carrying NVRTC's log.
package nvrtc
