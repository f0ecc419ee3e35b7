// Package goccl is a collective-communication library for Go: the job NCCL, Gloo and
// MPI do for distributed training. A Comm links a group of ranks (processes, or
// goroutines in tests) and runs AllReduce, Reduce, Broadcast, AllGather, ReduceScatter,
// Gather, Scatter, AllToAll, Barrier and Send/Recv over any registered transport (tcp,
// shm, rdma, nccl, inmem) with any registered algorithm (ring, tree, naive, rd, hier,
// direct), chosen by configuration or by a cost model ("auto"); AllToAllV (uneven
// blocks) and BatchSendRecv (a rank's sends and receives with several peers at once,
// like torch.distributed.batch_isend_irecv) run over the same links.
//
//	comm, err := goccl.Init(ctx, goccl.FromEnv())
//	if err != nil { ... }
//	defer comm.Close()
//	grads := make([]float32, n)
//	err = goccl.AllReduceSlice(ctx, comm, grads, goccl.Sum)
//
// Launch ranks with `goccl run -n 4 -- ./prog`, torchrun, srun or mpirun: FromEnv reads
// their variables. Config fields come from Go options, GOCCL_* variables and a YAML/JSON
// file named by GOCCL_CONFIG, with precedence options > env > file > defaults.
//
// Semantics follow NCCL: counts are elements; AllGather's and ReduceScatter's counts
// are per rank; in place when send and recv are the same memory (or, for AllGather and
// ReduceScatter, when the small buffer is this rank's block of the big one); Avg is Sum
// divided by the world size (truncating for integers); float16 and bfloat16 reduce in
// float32 and round to nearest even once per step. Operations on one Comm run in issue
// order; the ...Async variants return a *Work to overlap computation. After a failure
// the Comm is unusable (every call returns the first error), as with NCCL.
//
// Memory from AllocShared is mapped by every rank of the host (over shm links): large
// AllReduce, ReduceScatter, AllGather, Broadcast, Scatter and AllToAll calls
// whose buffers all lie in it
// read the peers' buffers in place (algorithm "direct", package algos/direct) instead of
// copying through the transport.
package goccl
