package algos

import (
	"context"
	"fmt"
	"sync"

	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// The helpers in this file are the building blocks the algorithms share: tagged sends
// and receives with errors that name the peer, a receive that reduces as it lands,
// chunking, a progress counter for pipelines, and scratch buffers.

// DefaultChunkBytes is the pipelining unit when Args.ChunkBytes is 0: large enough that
// per-message costs (a header, a wake-up) vanish against the payload, small enough that a
// 64 MiB ring step has 64 chunks in flight to overlap sending with reducing.
const DefaultChunkBytes = 512 << 10

// EagerBytes is the largest message an algorithm may send without a receive running
// concurrently on the same rank, provided no link then holds more than two such
// messages unread: the links' floor (transport.EagerFloor). Algorithms run such small
// steps in the calling goroutine instead of a sender and a receiver goroutine each,
// which is what small collectives spend most of their time on otherwise.
const EagerBytes = transport.EagerFloor

// EagerLimit is the eager size algorithms may assume on p's links: what p reports when
// it has an EagerBytes method (the communicator agrees one value across its ranks at
// Init, the smallest any link promises, see transport.Eager), else EagerBytes. Decisions
// that change which messages a collective sends must use it, so that every rank
// decides alike.
func EagerLimit(p Peers) int {
	if e, ok := p.(interface{ EagerBytes() int }); ok {
		if n := e.EagerBytes(); n >= EagerBytes {
			return n
		}
	}
	return EagerBytes
}

// OneEagerMessage reports whether a piece of n bytes goes as one message of chunk size
// cs that fits p's eager size (EagerLimit): a rank may then send it on its own
// goroutine, without a receive running beside it, and the algorithms do so for small
// steps.
func OneEagerMessage(p Peers, n, cs int) bool { return n <= cs && n <= EagerLimit(p) }

// Auto is the selector's name for "let the cost model choose".
const Auto = "auto"

// Tag builds a message tag from an algorithm id (4 bits), a phase (4 bits) and a running
// index (24 bits, wrapping). Distinct ids mean two ranks that run different algorithms
// for the same call get a mismatch error instead of each other's bytes.
func Tag(alg, phase uint8, index int) uint32 {
	return uint32(alg&0xf)<<28 | uint32(phase&0xf)<<24 | uint32(index)&0xffffff
}

// Algorithm ids for Tag, one per built-in algorithm.
const (
	TagNaive  uint8 = 1
	TagRing   uint8 = 2
	TagTree   uint8 = 3
	TagRD     uint8 = 5
	TagDirect uint8 = 6
	TagStaged uint8 = 7
	// TagTune marks the messages in which a communicator's ranks agree on auto's online
	// choice of algorithm (goccl's Config.AlgoTune), sent after a call's own.
	TagTune uint8 = 8
)

// Send transmits buf to peer under this operation's header with the given tag.
func Send(ctx context.Context, p Peers, peer int, tag uint32, buf []byte) error {
	if err := p.Link(peer).Send(ctx, p.Header(tag), buf); err != nil {
		return fmt.Errorf("send %d bytes to rank %d (tag %#x): %w", len(buf), peer, tag, err)
	}
	return nil
}

// Recv receives exactly len(buf) bytes from peer under the expected header and tag.
func Recv(ctx context.Context, p Peers, peer int, tag uint32, buf []byte) error {
	if err := p.Link(peer).Recv(ctx, p.Header(tag), buf); err != nil {
		return fmt.Errorf("recv %d bytes from rank %d (tag %#x): %w", len(buf), peer, tag, err)
	}
	return nil
}

// ColdBytes is the size of a collective's output from which its last step receives
// with RecvCold: the first of such an output has left the caches by the time the call
// returns anyway, and writing it past them saves reading every destination line before
// it is written. On the 2-core VM a 2-rank AllReduce over shm was 1-4 % slower with
// it at 16 MiB (three A/Bs) and 10-12 % faster at 32 and 48 MiB (BENCHMARKS.md,
// "Speed", 26).
const ColdBytes = 32 << 20

// RecvCold is Recv for a destination the caller will not read again soon: through
// transport.ColdReceiver when the link has it (shm writes it with non-temporal stores),
// else Recv.
func RecvCold(ctx context.Context, p Peers, peer int, tag uint32, buf []byte) error {
	link := p.Link(peer)
	cr, ok := link.(transport.ColdReceiver)
	if !ok {
		return Recv(ctx, p, peer, tag, buf)
	}
	if err := cr.RecvCold(ctx, p.Header(tag), buf); err != nil {
		return fmt.Errorf("recv %d bytes from rank %d (tag %#x): %w", len(buf), peer, tag, err)
	}
	return nil
}

// RecvReduce receives len(dst) bytes from peer and stores dst = a op incoming (dst may
// be a). When the link implements transport.Streamer the pieces are reduced as they
// arrive, with no staging copy; otherwise the message lands in a pooled scratch buffer.
func RecvReduce(ctx context.Context, p Peers, peer int, tag uint32, dt transport.DType, op transport.Op, dst, a []byte) error {
	return recvReduce(ctx, p, peer, tag, dt, op, dst, a, false)
}

// RecvReduceCold is RecvReduce for a destination the caller will not read again soon
// (a large output, as RecvCold's): the pieces are reduced with reduce.Apply3Stream,
// whose non-temporal stores (float32 sums and averages) skip reading dst's lines into
// the cache before writing them. The ring's last reduce-scatter step takes it from
// ColdBytes of output (BENCHMARKS.md, "Speed", 37a).
func RecvReduceCold(ctx context.Context, p Peers, peer int, tag uint32, dt transport.DType, op transport.Op, dst, a []byte) error {
	return recvReduce(ctx, p, peer, tag, dt, op, dst, a, true)
}

func recvReduce(ctx context.Context, p Peers, peer int, tag uint32, dt transport.DType, op transport.Op, dst, a []byte, cold bool) error {
	if len(a) != len(dst) {
		return fmt.Errorf("algos: %w: reduce into %d bytes from %d bytes", transport.ErrInvalid, len(dst), len(a))
	}
	link := p.Link(peer)
	if s, ok := link.(transport.Streamer); ok {
		// The callback escapes through the interface, so the reducer comes from a pool:
		// one allocation per message was a tenth of an 8-byte AllReduce's CPU time.
		st := reducers.Get().(*streamReducer)
		st.dt, st.op, st.dst, st.a, st.esz, st.cold = dt, op, dst, a, dt.Size(), cold
		err := s.RecvStream(ctx, p.Header(tag), len(dst), st.fn)
		st.dst, st.a = nil, nil
		clear(st.partial)
		reducers.Put(st)
		if err != nil {
			return fmt.Errorf("recv %d bytes from rank %d (tag %#x): %w", len(dst), peer, tag, err)
		}
		return nil
	}
	tmp := GetScratch(len(dst))
	defer PutScratch(tmp)
	if err := link.Recv(ctx, p.Header(tag), tmp); err != nil {
		return fmt.Errorf("recv %d bytes from rank %d (tag %#x): %w", len(dst), peer, tag, err)
	}
	if cold {
		return reduce.Apply3Stream(dt, op, dst, a, tmp)
	}
	return reduce.Apply3(dt, op, dst, a, tmp)
}

// streamReducer reduces a streamed message piece by piece. Pieces need not split at
// element boundaries, so the bytes of a split element are staged until all have come.
type streamReducer struct {
	dt      transport.DType
	op      transport.Op
	dst, a  []byte
	esz     int
	cold    bool // reduce with reduce.Apply3Stream (RecvReduceCold)
	partial map[int]*partialElem
	fn      func(int, []byte) error // piece, bound
}

var reducers = sync.Pool{New: func() any {
	s := new(streamReducer)
	s.fn = s.piece // bound once: a method value passed on escapes, and allocates each time
	return s
}}

type partialElem struct {
	b    [8]byte
	have int
}

func (s *streamReducer) piece(off int, p []byte) error {
	lo, hi := off, off+len(p)
	alo := (lo + s.esz - 1) / s.esz * s.esz // first element boundary at or after lo
	ahi := hi / s.esz * s.esz               // last element boundary at or before hi
	head := min(alo, hi)                    // end of the leading partial element
	if head > lo {
		if err := s.stage(lo, p[:head-lo]); err != nil {
			return err
		}
	}
	if alo < ahi {
		apply := reduce.Apply3
		if s.cold {
			apply = reduce.Apply3Stream
		}
		if err := apply(s.dt, s.op, s.dst[alo:ahi], s.a[alo:ahi], p[alo-lo:ahi-lo]); err != nil {
			return err
		}
	}
	if tail := max(ahi, head); tail < hi {
		return s.stage(tail, p[tail-lo:])
	}
	return nil
}

// stage copies bytes that start at off and lie within one element, reducing the element
// once all of its bytes are in.
func (s *streamReducer) stage(off int, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if s.partial == nil {
		s.partial = map[int]*partialElem{}
	}
	e := off / s.esz
	pe := s.partial[e]
	if pe == nil {
		pe = &partialElem{}
		s.partial[e] = pe
	}
	copy(pe.b[off-e*s.esz:], p)
	pe.have += len(p)
	if pe.have < s.esz {
		return nil
	}
	delete(s.partial, e)
	at := e * s.esz
	return reduce.Apply3(s.dt, s.op, s.dst[at:at+s.esz], s.a[at:at+s.esz], pe.b[:s.esz])
}

// ChunkSize is the pipelining unit for a, in bytes: Args.ChunkBytes (or def when it is
// 0) rounded down to whole elements, and at least one element.
func ChunkSize(a *Args, def int) int {
	c := a.ChunkBytes
	if c == 0 {
		c = def
	}
	esz := max(a.DType.Size(), 1)
	return max(c&^(esz-1), esz) // whole elements (sizes are powers of two), at least one
}

// NumChunks is how many chunks of size bytes cover n bytes. It is at least 1: an empty
// range still sends one empty message, so every rank runs the same message pattern for
// any count, and a rank whose count differs gets a mismatch rather than waiting forever.
func NumChunks(n, size int) int {
	return max(1, (n+size-1)/size)
}

// Chunk returns the byte range [lo, hi) of chunk i of n bytes.
func Chunk(n, size, i int) (lo, hi int) {
	lo = min(i*size, n)
	return lo, min(lo+size, n)
}

// Progress counts completed steps of a pipeline stage and lets other goroutines wait for
// a count. The zero value is ready; it is safe for concurrent use.
type Progress struct {
	mu sync.Mutex
	n  int
	ch chan struct{} // closed and replaced on every Advance
}

// Advance records one more completed step and wakes the waiters.
func (p *Progress) Advance() {
	p.mu.Lock()
	p.n++
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
	p.mu.Unlock()
}

// Wait blocks until at least n steps completed or ctx ends.
func (p *Progress) Wait(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		if p.n >= n {
			p.mu.Unlock()
			return nil
		}
		if p.ch == nil {
			p.ch = make(chan struct{})
		}
		ch := p.ch
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// scratch pools by power-of-two size class, so a 64 MiB reduce-scatter does not pay for
// fresh (page-faulting, zeroed) memory on every call. Small classes keep a short free
// list instead: putting a slice into a sync.Pool allocates its header, which for a small
// collective is the call's only allocation. The lists hold at most smallKeep buffers of
// up to 64 KiB each, about 2 MiB in all.
var (
	scratchPools [48]sync.Pool
	smallFree    [smallClasses]struct {
		mu   sync.Mutex
		bufs [][]byte
	}
)

const (
	smallClasses = 17 // sizes up to 1<<16
	smallKeep    = 16
)

func sizeClass(n int) int {
	c := 0
	for 1<<c < n {
		c++
	}
	return c
}

// GetScratch returns a buffer of n bytes with unspecified contents; give it back with
// PutScratch when done.
func GetScratch(n int) []byte {
	if n == 0 {
		return nil
	}
	c := sizeClass(n)
	if c >= len(scratchPools) {
		return make([]byte, n)
	}
	if c < smallClasses {
		f := &smallFree[c]
		f.mu.Lock()
		if k := len(f.bufs); k > 0 {
			b := f.bufs[k-1]
			f.bufs[k-1] = nil
			f.bufs = f.bufs[:k-1]
			f.mu.Unlock()
			return b[:n]
		}
		f.mu.Unlock()
	} else if b, ok := scratchPools[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<c)
}

// PutScratch returns a buffer from GetScratch to the pool.
func PutScratch(b []byte) {
	if cap(b) == 0 {
		return
	}
	c := sizeClass(cap(b))
	if c >= len(scratchPools) || 1<<c != cap(b) {
		return
	}
	if c < smallClasses {
		f := &smallFree[c]
		f.mu.Lock()
		if len(f.bufs) < smallKeep {
			f.bufs = append(f.bufs, b[:cap(b)])
		}
		f.mu.Unlock()
		return
	}
	p := new([]byte)
	*p = b[:cap(b)]
	scratchPools[c].Put(p)
}
