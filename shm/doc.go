// Package shm is goccl's shared-memory transport between processes (and goroutines) on
// one host, in the manner of NCCL's SHM transport and Open MPI's vader BTL.
//
// Each linked pair of ranks shares one segment, a file under /dev/shm named after the
// communicator and the pair ("goccl-shm-<comm>-<hash>-<lo>-<hi>"). The lower rank
// creates it (fallocate'd, so a full /dev/shm fails at set-up instead of with SIGBUS
// later; both ranks map it with every page touched, so no message pays a page's first
// touch), writes a header (magic, layout version, communicator, ranks, its pid) and
// publishes the name through the rendezvous store; the higher rank maps it, removes the
// name at once, checks the header and marks it attached. From then on no name exists:
// Close, a panic or SIGKILL of either rank leaves nothing in /dev/shm. A survivor
// removes a name whose peer died before mapping it, and RemoveSegments lets a launcher
// sweep a communicator after ranks were killed while linking.
//
// Each direction is a lock-free single-producer single-consumer ring with head and tail
// on separate cache lines. Messages up to 16 bytes ride inside their 64-byte header
// record, and messages up to 2 KiB follow it whole, written before the
// record's stamp: the receiver of either waits for the stamp alone. Larger ones follow
// it written and published chunk by chunk, so the receiver copies (or, through
// transport.Streamer, reduces straight from the ring) one chunk while the next is being
// written. A sender may also write a message in place
// (transport.Reserver: room for it in the ring, published as it is written), which is
// how the two-rank ring writes its reduced chunks. A waiting rank polls for 2 µs (two PAUSEs apart, so
// that it does not pull the line the peer is writing back between the writer's stores),
// then polls yielding the CPU between polls (from the start when ranks outnumber cores)
// for the rest of shm.spin, then sleeps on a futex in 5 ms slices, checking between slices
// its context, the peer's closed flag and, through a pidfd, whether the peer process
// still runs: a dead peer is a *transport.PeerError, not a hang.
//
// Messages of shm.single_copy_min bytes or more skip the ring: the sender posts its
// payload's address and waits, the receiver copies it with process_vm_readv straight
// into its destination and acks. Where the kernel refuses (seccomp, Yama), the link
// falls back to the ring by itself. Settings are transport.Params keys; see
// ParseOptions:
//
//	shm.single_copy      auto | true | false    (true: a refusal is an error)
//	shm.single_copy_min  32M                    smallest single-copy message
//	shm.ring_bytes       4M                     per direction, a power of two
//	shm.chunk_bytes      64K                    pipelining unit
//	shm.spin             50us                   poll this long before sleeping
//	shm.dir              /dev/shm
//	shm.direct_min       256K (2 ranks), 64K    smallest collective read in place (off: never)
//
// Windows (CreateWindow, OpenWindow) are the memory behind goccl's Comm.AllocShared: one
// file per rank and allocation, named after the communicator like the segments (so
// RemoveSegments sweeps them), written by its rank and mapped read-only by the others,
// and unlinked once every rank has mapped it. Collectives whose buffers lie in them read
// the peers' buffers in place (algos/direct) from shm.direct_min bytes.
//
// Lifetimes: Open creates nothing on disk; Connect creates or attaches one segment per
// peer; Conn.Close unmaps it (and wakes both sides' blocked calls); Endpoint.Close
// leaves links open. Importing the package registers the transport as "shm":
//
//	import _ "github.com/goccl/goccl/shm"
//
// CanConnect accepts a peer with the same host identity from the rendezvous whose
// handle shows the same user, kernel boot, /dev/shm mount and pid namespace. The
// package builds everywhere; off Linux Open returns transport.ErrNotSupported.
package shm
