// Package direct is the algorithm for buffers the ranks share: when every rank's buffers
// lie in memory from Comm.AllocShared (algos.Shared), each rank reads its peers' buffers
// where they are instead of receiving copies through a transport, as MPI's shared-memory
// windows and NCCL's symmetric-memory kernels do.
//
// AllReduce: rank r reduces the r-th of W slices of every rank's input straight into its
// own output (W reads and one write per byte of the slice), then, once every rank has
// done so, copies the other W-1 finished slices from the peers' outputs. Per byte of the
// vector a rank moves (3W-1)/W bytes through memory, 2.5 at two ranks, against 4.5 for
// the ring through a shared ring buffer (a copy in and a copy or reduce out at each of
// its 2(W-1)/W steps). ReduceScatter is the first half, AllGather the second; Broadcast
// and Scatter copy from the root's input, AllToAll copies every peer's block for this
// rank (not in place: a rank would overwrite what its peers still read).
//
// The ranks hand-shake three times (AllReduce; twice for the others), each a message to
// every peer: at entry they swap where their buffers are, and every rank applies the
// same rule to the same W descriptions, so either all run the direct algorithm or all
// return ErrNotShared (a buffer outside the shared memory on some rank) and the caller
// runs another algorithm; in the middle, so that nobody copies a slice before it is
// final; at exit, so that nobody returns (and lets its caller overwrite its buffers)
// while a peer still reads them. Each hand-shake costs about a small message's latency,
// which is why the communicator only takes this path from shm.direct_min bytes.
//
// Results: each element of an AllReduce is reduced once, by the rank that owns its
// slice, in rank order starting with that rank's own input, and copied to the others,
// so every rank ends with the same bits.
package direct
