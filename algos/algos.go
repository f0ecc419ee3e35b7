package algos

import (
	"context"
	"errors"

	"github.com/goccl/goccl/transport"
)

// Peers is what an algorithm sees of the communicator during one operation: its rank,
// the group size, a link to every other rank, and the header to stamp on messages.
// Peers may be a sub-group view (hierarchical algorithms): ranks are group-local.
type Peers interface {
	Rank() int
	Size() int
	// Link returns the connection to peer (0 <= peer < Size(), peer != Rank()).
	Link(peer int) transport.Conn
	// Header returns this operation's header with the given step tag.
	Header(tag uint32) transport.Header
}

// Args is one collective call, in NCCL's conventions. Send and Recv are host memory;
// in-place calls pass the same memory (or NCCL's offset aliasing for AllGather and
// ReduceScatter), which algorithms must handle.
type Args struct {
	Kind  transport.Kind
	Send  []byte // input; nil for Barrier and for ranks that send nothing
	Recv  []byte // output
	Count int    // elements; per rank for AllGather, ReduceScatter, Gather, Scatter, AllToAll (per peer)
	DType transport.DType
	Op    transport.Op
	Root  int // root for Reduce, Broadcast, Gather, Scatter; the peer for SendRecv
	// SendPeer and RecvPeer are the ranks for KindSendRecv (-1 = no send / no receive).
	SendPeer, RecvPeer int
	// ChunkBytes is the pipelining unit (0 = the algorithm's default).
	ChunkBytes int
}

// Algorithm runs collectives over Peers. Implementations register themselves in init.
type Algorithm interface {
	// Name is the registry name ("ring").
	Name() string
	// Supports reports whether Run implements kind; the selector falls back otherwise.
	Supports(kind transport.Kind) bool
	// Run executes the collective; every rank of Peers calls it with matching Args.
	Run(ctx context.Context, p Peers, a *Args) error
}

// Topology is an optional Peers ability: where each rank lives, for hierarchical
// algorithms. Ranks with equal Host strings share a host (and usually shared memory).
type Topology interface {
	// Host is the host identity of rank r (group-local numbering).
	Host(r int) string
	// Transport names the transport of the link to rank r ("self" for Rank()).
	Transport(r int) string
}

// Shared is an optional Peers ability: memory that the ranks of the group map from each
// other (goccl's Comm.AllocShared), so that an algorithm can read a peer's buffer in
// place instead of receiving a copy of it (algos/direct). Allocations are collective, so
// every rank has the same ones, numbered alike.
type Shared interface {
	// SharedAllocs is the number of live allocations (the same on every rank); 0 means
	// no buffer can be shared.
	SharedAllocs() int
	// Locate finds b in this rank's shared memory: the allocation's number and b's
	// offset in it. ok is false when b, or any part of it, lies elsewhere, or is empty.
	Locate(b []byte) (alloc, off int, ok bool)
	// PeerView returns n bytes at off in rank r's part of allocation alloc as this rank
	// maps it: read-only for r != Rank(), valid while the allocation lives.
	PeerView(r, alloc, off, n int) ([]byte, error)
}

// Stager is an optional Peers ability: a staging area in memory that every rank of the
// group maps (goccl's communicator keeps one per host-local group over shm), through
// which an algorithm can pass ordinary, unshared buffers with one copy in and one copy
// out (algos/staged). Staging sets the area up on first use: every rank calls it at the
// same point of the same call, and the ranks agree, by messages under the call's header,
// on whether it exists. It returns every rank's part as this rank maps it (parts[r],
// writable for r == Rank() and read-only otherwise, all of one length), or
// ErrNoStaging on every rank alike, after which the caller runs another algorithm.
type Stager interface {
	Staging(ctx context.Context) (parts [][]byte, err error)
}

// ErrNoStaging says that the group has no staging area (not every link is shared
// memory, staging is turned off, or setting it up failed on some rank).
var ErrNoStaging = errors.New("the ranks share no staging memory")
