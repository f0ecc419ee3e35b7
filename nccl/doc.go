// Package nccl is goccl's NCCL transport: NVIDIA's library, loaded at run time, moving
// data between GPUs. Importing it registers the transport "nccl" and a device Stager
// (transport.RegisterStager), so host-only transports can carry CUDA buffers.
//
// Nothing here needs CUDA or NCCL at build time. LoadLibrary and cuda.Load dlopen
// libnccl.so.2 and libcudart.so.13/.12 from, in order: the path in Params "nccl.lib" /
// "cuda.lib" (which goccl's config fills from GOCCL_NCCL_LIB / GOCCL_CUDA_LIB), the
// system library path, the pip wheel directories under every Python site-packages
// root (nvidia/nccl/lib, nvidia/cu13/lib, nvidia/cuda_runtime/lib), $CONDA_PREFIX/lib
// and /usr/local/cuda/lib64. When a library, a symbol or a GPU is missing, Open fails
// with an error wrapping transport.ErrNotSupported that says what was searched; with
// CGO_ENABLED=0 everything builds and reports ErrNotSupported.
//
// How it maps onto the transport contract:
//   - Open loads the libraries, picks the rank's GPU (Params "nccl.device", else
//     "local_rank" or Rank, modulo the device count) and publishes its status in the
//     store, so a rank that cannot run NCCL makes its peers fail fast, naming it.
//   - Each direction of each Conn is its own two-rank communicator, created on the first
//     message: the sender makes the ncclUniqueId, shares it through the store and both
//     join. Messages go as ncclSend/ncclRecv inside group calls from device staging
//     memory (or pinned host memory with Params "nccl.p2p_buffer": "pinned"); the
//     receiver checks the 40-byte header before it receives the payload. One
//     communicator per direction is what keeps a ring's concurrent send and receive from
//     deadlocking: NCCL runs one communicator's operations in issue order.
//   - The Endpoint implements transport.Offloader: algorithm "nccl" runs ncclAllReduce,
//     ncclBroadcast, ncclReduce, ncclAllGather, ncclReduceScatter and (2.28+) ncclAlltoAll,
//     ncclGather, ncclScatter on one communicator over all ranks, created by the first
//     offloaded call; older libraries get AllToAll/Gather/Scatter as grouped send/recv.
//     Device buffers are passed as they are; host buffers are staged through device memory.
//   - Every wait polls cudaStreamQuery and ncclCommGetAsyncError and honours its context.
//     When the context ends first, the communicator is aborted (ncclCommAbort) — NCCL
//     cannot cancel one operation — and every later call on it fails with the cause.
//     Communicators are nonblocking (ncclConfig_t.blocking = 0) where the library allows
//     (2.14+), so creation honours the context too.
//
// CUDA's current device and NCCL's group state are per OS thread; every sequence that
// depends on them (cudaSetDevice + ncclCommInitRank, ncclGroupStart ... ncclGroupEnd)
// runs inside one C call. ncclUniqueId is passed by value and ncclConfig_t is the 2.18
// 48-byte prefix with version 21800 and every unset field NCCL_CONFIG_UNDEF_INT, which
// every NCCL since 2.14 reads correctly.
//
// GPUs lists NVIDIA GPUs through NVML (go-nvml), calling nothing before nvml.Init
// succeeds; FormatDevice and CUDADeviceString give nccl-tests' device column
// ("[0000:18:00] NVIDIA H200").
//
// Known limits: NCCL (and so this transport) cannot see that a peer closed or died on
// intra-node paths; a blocked Send or Recv ends at its context's deadline. NCCL's
// bootstrap does not authenticate, so Local.AuthToken is not applied here.
//
// Tests run against fake libnccl.so.2 and libcudart.so.12 built from testdata by
// TestMain (skipped without a C compiler). The fakes emulate NCCL and CUDA on host
// memory and record every call, so the tests check goccl's side of the ABI (argument
// order, by-value ncclUniqueId, the ncclConfig_t layout, enum values, per-thread
// device, error translation) and the transport logic. That is a contract test, not
// evidence that NCCL works: scripts/gpu-check.sh runs the real thing on a GPU machine.
package nccl
