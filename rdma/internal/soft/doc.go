// Package soft is a software RDMA provider: it emulates reliable-connected queue pairs
// between processes on one Linux host, so goccl's RDMA protocol engine (credits, CTS
// FIFO, chunking, completions, error paths) runs and is tested where no RDMA hardware
// exists. It is a stand-in for a NIC, not a fast path: on one host the shm transport is
// the right choice.
//
// What a NIC keeps, this provider keeps in shared memory. Every memory region, queue pair
// and completion queue is a memfd (anonymous tmpfs memory, so nothing is left behind in
// /dev/shm when a process dies) mapped MAP_SHARED. A peer reaches them through
// /proc/<pid>/fd/<n>, which needs the same rights as reading another process's files
// (same user). The per-device MR table plays the NIC's role of checking an rkey and the
// bounds of every remote write, so a bad rkey completes with "remote access error" as on
// hardware.
//
// Posting an RDMA WRITE copies the bytes from the local region into the peer's mapping of
// the remote region, in the poster's goroutine; WRITE WITH IMMEDIATE then consumes one
// receive the peer posted (waiting, like an RNR retry, when none is posted) and pushes a
// RECV_RDMA_WITH_IMM completion into the peer's completion queue, a multi-producer ring
// with a futex word so a waiting consumer sleeps instead of spinning. A peer process that
// exited (seen through a pidfd) or a destroyed remote QP makes the write complete with
// "transport retry counter exceeded", what an RC QP reports when its peer stops answering.
package soft
