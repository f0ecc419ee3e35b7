package transport

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Transport is a way to move bytes between ranks (tcp, shm, rdma, nccl, inmem).
// A Transport value is stateless configuration; Open creates the per-rank state.
type Transport interface {
	// Name is the registry name ("tcp").
	Name() string
	// Open prepares this rank's endpoint (listening socket, device context ...).
	// It returns an error wrapping ErrNotSupported when the transport cannot run here.
	Open(ctx context.Context, local Local) (Endpoint, error)
}

// Local describes the rank that opens an endpoint.
type Local struct {
	CommID    string        // unique per communicator; part of every handshake
	Rank      int           // this rank, 0 <= Rank < World
	World     int           // number of ranks
	Host      string        // host identity from the rendezvous (same string = same host)
	Store     Store         // the rendezvous store, already scoped to this communicator
	Timeout   time.Duration // bound for connection set-up
	AuthToken []byte        // when non-empty, links authenticate with an HMAC challenge
	Params    Params        // transport-specific settings ("tcp.sockets": "4")
	Logger    *slog.Logger  // never nil when set by the communicator
}

// Params holds transport-specific settings by key. Keys are "<transport>.<name>".
type Params map[string]string

// Int returns the integer under key, or def when it is absent or malformed.
func (p Params) Int(key string, def int) int {
	if v, ok := p[key]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			return n
		}
	}
	return def
}

// Bool returns the boolean under key, or def when it is absent or malformed.
func (p Params) Bool(key string, def bool) bool {
	if v, ok := p[key]; ok {
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			return b
		}
	}
	return def
}

// String returns the string under key, or def when it is absent.
func (p Params) String(key, def string) string {
	if v, ok := p[key]; ok {
		return v
	}
	return def
}

// PeerInfo is what a rank learns about a peer from the rendezvous.
type PeerInfo struct {
	Rank   int
	Host   string // host identity; equal strings mean the same host
	Pid    int
	Handle []byte // the peer endpoint's Handle for this transport
}

// Endpoint is one rank's open instance of a transport.
type Endpoint interface {
	// Handle is published to peers through the store (an address, a segment prefix ...).
	Handle() []byte
	// CanConnect returns nil when a link to peer is possible, or an error saying why not.
	// It must give the same answer on both sides of a pair.
	CanConnect(peer PeerInfo) error
	// Connect establishes the link to peer. Both ranks of a pair call it; the transport
	// decides who dials. It handshakes (communicator id, ranks, version, auth) first.
	Connect(ctx context.Context, peer PeerInfo) (Conn, error)
	// Close releases the endpoint; links already returned stay open until closed.
	Close() error
}

// Conn is a reliable, ordered, full-duplex message link to one peer. One goroutine may
// Send while another Receives; two concurrent Sends (or Recvs) are not allowed.
type Conn interface {
	// Peer is the rank at the other end.
	Peer() int
	// Send transmits one message; payload may be reused once Send returns.
	Send(ctx context.Context, h Header, payload []byte) error
	// Recv receives the next message into buf. Its header must equal want and its length
	// must equal len(buf), or Recv returns a *MismatchError (and the link is unusable).
	Recv(ctx context.Context, want Header, buf []byte) error
	// Close tears the link down; a blocked Send or Recv on either side returns an error.
	Close() error
}

// Streamer is an optional Conn ability: deliver a message in pieces as they arrive,
// so the receiver can reduce a piece while the next is in flight and skip a copy.
// fn gets pieces that cover [0, n) exactly once, in any order, never concurrently;
// p is only valid during the call. An error from fn aborts the receive (the link is
// then unusable) and is returned.
type Streamer interface {
	RecvStream(ctx context.Context, want Header, n int, fn func(off int, p []byte) error) error
}

// ColdReceiver is an optional Conn ability: RecvCold is Recv for a destination the
// caller will not read again soon (the last step of a collective larger than the
// caches), which the link may write past the CPU caches (non-temporal stores): the
// copy then skips reading each destination line before writing it, and leaves the
// caches to what is read next. Its result is Recv's, byte for byte.
type ColdReceiver interface {
	RecvCold(ctx context.Context, want Header, buf []byte) error
}

// Reserver is an optional Conn ability: the sender writes a message's payload straight
// into the link's own memory (a shared-memory ring) instead of handing Send a buffer to
// copy, so a payload computed on the fly (a reduction's result) is written once.
// ReserveMax is the largest n Reserve takes on this link (0: none), whatever the
// link holds at the moment. Reserve waits under ctx until the link has room for a
// message of n bytes under h and returns where its payload goes: first, then second
// when the room wraps around the link's end (len(first)+len(second) == n). The caller
// writes every byte and then calls Commit, which sends the message. On the way it may
// call Advance(k) once the payload's first k bytes are written (k only grows), and the
// link may then show them to the peer, whose receive can start before Commit. Between
// Reserve and Commit (or Abort) no other send may use the link. Abort drops the
// message: before any Advance the link stays as it was; after one the peer may have
// seen part of it, and the link fails. The peer receives the message as any other, with
// Recv or RecvStream.
type Reserver interface {
	ReserveMax() int
	Reserve(ctx context.Context, h Header, n int) (first, second []byte, err error)
	Advance(k int)
	Commit(ctx context.Context) error
	Abort()
}

// Eager is an optional Conn ability: a Send of at most EagerBytes() bytes returns
// without the peer's Recv as long as no more than two such messages are unread on the
// link (the peer's buffering holds them). It must give the same answer at both ends. A
// Conn without it promises EagerFloor, and goccl.Init refuses a link that says less
// (the conformance suite's EagerFloor check tests the promise). Algorithms run steps
// this small on one goroutine, with no sender and receiver goroutines to wake.
type Eager interface {
	EagerBytes() int
}

// TrySender is an optional Conn ability: TrySend sends a message only when it can go
// at once, without waiting for anything (room in the link's buffer, a lock, the peer);
// otherwise it sends nothing and reports sent=false, and the caller may Send it. An
// error means the link is unusable, as Send's would. A caller that has not yet armed a
// deadline for its operation uses it to send first and arm afterwards: a call that
// cannot wait needs no deadline (the communicator's small AllReduce does, goccl's
// fastpath.go).
//
// A sent message may still be on its way out of this core when TrySend returns (the
// store that completes it need not be fenced, so the caller can work while the line
// travels). Flush ends that: the caller calls it once before it waits for anything,
// and it wakes a receiver that went to sleep. A receiver that sleeps through a missing
// Flush still finds the message when its sleep times out.
//
// shm takes a message of up to 2 KiB with its record into free ring space; tcp one of
// up to 16 KiB with one non-blocking write, finishing on a goroutine of the link's a
// message the socket took only in part (the link's next send waits for it).
type TrySender interface {
	TrySend(h Header, payload []byte) (sent bool, err error)
	Flush()
}

// EagerFloor is what every link takes without a running receive (transport.Eager): a
// TCP socket's buffers, the shm ring (64 KiB at least), inmem's queue, rdma's slots
// (Init checks), the nccl link's send queue. algos.EagerBytes is this.
const EagerFloor = 16 << 10

// Describer is an optional Conn ability: a one-line description for logs
// ("tcp 127.0.0.1:4000->127.0.0.1:4001, 4 sockets").
type Describer interface {
	Describe() string
}

// Store is the rendezvous key-value store ranks use to find each other.
type Store interface {
	// Set stores value under key, replacing any earlier value.
	Set(ctx context.Context, key string, value []byte) error
	// Get waits until key exists (or ctx ends) and returns its value.
	Get(ctx context.Context, key string) ([]byte, error)
	// Add atomically adds delta to the integer under key (0 if absent) and returns the sum.
	Add(ctx context.Context, key string, delta int64) (int64, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the client (and the server, for a store that serves itself).
	Close() error
}
