package nccl

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/transport"
)

// maxDrain bounds the payload a receiver accepts only to discard it after a mismatch.
const maxDrain = 1 << 30

// p2pChunk is the most payload one NCCL send or receive of a link carries. Each
// direction's staging memory (the frame header and one chunk) is allocated once, when
// the link is set up, and larger messages go through it chunk by chunk. Growing it on
// demand meant cudaFree while the other direction's receive kernel was running;
// cudaFree waits for the whole device, that kernel waits for the peer's send, and the
// peer was in the same cudaFree: both ranks hung (seen on an H200 with the ring over
// NCCL p2p, at random steps from 128 KiB messages on).
const p2pChunk = 4 << 20

type direction int

const (
	dirSend direction = iota
	dirRecv
)

// link is one direction of a conn: a two-rank communicator in which the sender is rank
// 0 and the receiver rank 1, plus staging memory for messages.
//
// Why one communicator per direction: NCCL runs the operations of one communicator in
// issue order. The algorithms call Send and Recv on the same peer from two goroutines
// (a ring step sends right while it receives from the left); on a shared communicator
// each side's send would be queued before its receive and, beyond NCCL's internal
// buffering, both would wait forever. With a communicator per direction, sends and
// receives progress independently, exactly like the two directions of a socket.
type link struct {
	dir    direction
	mu     sync.Mutex           // one Send (or Recv) at a time
	cur    atomic.Pointer[comm] // nil until the conn's setup; read by Close while a call holds mu
	err    error                // closed: the link is unusable (under mu)
	dev    uintptr
	pinned *cuda.Pinned
	n      int
}

// conn is the Conn to one peer.
type conn struct {
	e       *endpoint
	peer    int
	host    string
	out, in link

	eager eagerSender // Sends of at most transport.EagerFloor return once queued

	setupMu  sync.Mutex // both directions' communicators are created under it, once
	setupErr error      // why they could not be
	closed   bool       // under setupMu: Close has begun, create nothing

	closeOnce sync.Once
}

func (c *conn) Peer() int { return c.peer }

func (c *conn) Describe() string {
	return fmt.Sprintf("nccl %s rank %d <-> rank %d, cuda device %d, %s staging", VersionString(c.e.lib.Version()),
		c.e.local.Rank, c.peer, c.e.dev.Ordinal(), map[p2pMode]string{p2pDevice: "device", p2pPinned: "pinned host"}[c.e.p2p])
}

func (c *conn) p2pKey(src, dst int) string { return fmt.Sprintf("nccl/p2p/%d-%d", src, dst) }

// ensure returns l's communicator; the caller holds l.mu. The conn's first Send or Recv
// creates both directions' communicators, in the same order on both ranks (the lower
// rank's sending direction first). Creating a two-rank NCCL communicator blocks until
// both ranks join it, so creating only the direction at hand deadlocked whenever both
// ranks sent first, each waiting in its own sending communicator for the other to join
// it, as every small exchange and recursive doubling does (TestAlgorithmsOverLinks).
func (c *conn) ensure(ctx context.Context, l *link) (*comm, error) {
	if l.err != nil {
		return nil, l.err
	}
	if cm := l.cur.Load(); cm != nil {
		return cm, nil
	}
	c.setupMu.Lock()
	defer c.setupMu.Unlock()
	if c.setupErr == nil && l.cur.Load() == nil {
		c.setupErr = c.setup(ctx)
	}
	if c.setupErr != nil {
		return nil, c.setupErr
	}
	return l.cur.Load(), nil
}

// setup creates both directions' communicators; the caller holds setupMu.
func (c *conn) setup(ctx context.Context) error {
	if c.closed {
		return fmt.Errorf("nccl: link to rank %d: %w", c.peer, transport.ErrClosed)
	}
	order := [2]*link{&c.out, &c.in}
	if c.peer < c.e.local.Rank {
		order = [2]*link{&c.in, &c.out}
	}
	for _, l := range order {
		if err := c.allocStage(l); err != nil {
			return fmt.Errorf("nccl: link to rank %d: staging %d bytes: %w", c.peer, transport.FrameHeaderSize+p2pChunk, err)
		}
		cm, err := c.create(ctx, l)
		if err != nil {
			return err
		}
		l.cur.Store(cm)
	}
	return nil
}

// create makes l's communicator: the sender makes the unique id and publishes it, the
// receiver waits for it; both then join a two-rank communicator.
func (c *conn) create(ctx context.Context, l *link) (*comm, error) {
	me := c.e.local.Rank
	src, dst, rank, creator := me, c.peer, 0, me
	if l.dir == dirRecv {
		src, dst, rank, creator = c.peer, me, 1, c.peer
	}
	ctx, cancel := c.e.setupCtx(ctx)
	defer cancel()
	err := c.e.checkPeers(ctx, c.peer)
	var id UniqueID
	if err == nil {
		id, err = c.e.sharedID(ctx, c.p2pKey(src, dst), creator, me)
	}
	var cm *comm
	if err == nil {
		cm, err = c.e.lib.newComm(ctx, c.e.dev, 2, rank, id, c.e.cfg)
	}
	if err != nil {
		return nil, c.peerErr(fmt.Errorf("nccl: link rank %d -> rank %d: %w", src, dst, err))
	}
	return cm, nil
}

func (c *conn) peerErr(err error) error {
	return &transport.PeerError{Peer: c.peer, Host: c.host, Err: err}
}

// allocStage allocates l's staging memory, the frame header and one p2pChunk: device
// memory by default, or pinned host memory with Params nccl.p2p_buffer=pinned. The
// caller holds setupMu, before the link's communicator exists.
func (c *conn) allocStage(l *link) error {
	size := transport.FrameHeaderSize + p2pChunk
	if c.e.p2p == p2pPinned {
		p, err := c.e.rt.MallocHost(size)
		if err != nil {
			return err
		}
		l.pinned = p
	} else {
		p, err := c.e.dev.Malloc(size)
		if err != nil {
			return err
		}
		l.dev = p
	}
	l.n = size
	return nil
}

// stage returns l's staging memory: its device address, and the host view when it is
// pinned host memory (nil for device memory).
func (c *conn) stage(l *link) (uintptr, []byte) {
	if l.pinned != nil {
		return l.pinned.Ptr(), l.pinned.Bytes()
	}
	return l.dev, nil
}

// afterHeader is the payload part of staging memory at ptr (host: its host view, nil
// for device memory), which starts with the frame header.
func afterHeader(ptr uintptr, host []byte) (uintptr, []byte) {
	if host == nil {
		return ptr + transport.FrameHeaderSize, nil
	}
	return ptr + transport.FrameHeaderSize, host[transport.FrameHeaderSize:]
}

// put copies b into staging memory at ptr (host, its host view, when pinned).
func (c *conn) put(ptr uintptr, host, b []byte) error {
	if host != nil {
		copy(host, b)
		return nil
	}
	return c.e.dev.CopyHtoD(ptr, b)
}

// get copies staging memory at ptr (host, its host view, when pinned) into b.
func (c *conn) get(b []byte, ptr uintptr, host []byte) error {
	if host != nil {
		copy(b, host)
		return nil
	}
	return c.e.dev.CopyDtoH(b, ptr)
}

func (c *conn) freeStage(l *link) {
	if l.pinned != nil {
		_ = l.pinned.Free()
		l.pinned = nil
	}
	if l.dev != 0 {
		_ = c.e.dev.Free(l.dev)
		l.dev = 0
	}
	l.n = 0
}

// An NCCL send completes only with its receive, but a link without transport.Eager
// promises transport.EagerFloor (the algorithms send steps this small on both ranks
// before they receive). So the link queues such messages (two at most) for a goroutine
// of its own that makes the NCCL calls, as a socket's buffer would.

// eagerSender is the link's queue of small messages and the goroutine draining it.
type eagerSender struct {
	once sync.Once
	q    chan eagerMsg
	quit chan struct{} // closed by Close
	err  atomic.Pointer[error]
}

// eagerMsg is one queued message, or (flushed != nil) a marker closed once every
// message queued before it has been sent.
type eagerMsg struct {
	h       transport.Header
	payload []byte
	flushed chan struct{}
}

// Send transmits the 40-byte frame header and the payload as two ncclSend calls in one
// group. A payload of at most transport.EagerFloor is copied and queued, and Send returns at
// once unless two are queued already; a larger one waits for the queue to drain and
// returns when NCCL has delivered it (the receiver has posted its receive). A queued
// message that fails fails the link: the next Send or Recv returns its error.
func (c *conn) Send(ctx context.Context, h transport.Header, payload []byte) error {
	s := &c.eager
	s.once.Do(func() {
		s.q = make(chan eagerMsg, 2)
		go c.drainEager()
	})
	if p := s.err.Load(); p != nil {
		return *p
	}
	m := eagerMsg{h: h}
	if len(payload) <= transport.EagerFloor {
		m.payload = append(make([]byte, 0, len(payload)), payload...)
	} else {
		m.flushed = make(chan struct{})
	}
	select {
	case s.q <- m:
	case <-ctx.Done():
		return fmt.Errorf("nccl: send to rank %d: %w", c.peer, ctxErr(ctx))
	case <-s.quit:
		return fmt.Errorf("nccl: send to rank %d: %w", c.peer, transport.ErrClosed)
	}
	if m.flushed == nil {
		return nil
	}
	select {
	case <-m.flushed:
	case <-ctx.Done():
		return fmt.Errorf("nccl: send to rank %d: %w", c.peer, ctxErr(ctx))
	case <-s.quit:
		return fmt.Errorf("nccl: send to rank %d: %w", c.peer, transport.ErrClosed)
	}
	if p := s.err.Load(); p != nil {
		return *p
	}
	return c.send(ctx, h, payload)
}

// drainEager sends the queued messages in order until Close; queued sends get the
// endpoint's timeout (or none) and end when Close aborts the communicator.
func (c *conn) drainEager() {
	s := &c.eager
	for {
		select {
		case <-s.quit:
			return
		case m := <-s.q:
			if m.flushed != nil {
				close(m.flushed)
				continue
			}
			if s.err.Load() != nil {
				continue // the link has failed: drop what was queued after
			}
			ctx, cancel := c.e.setupCtx(context.Background())
			if err := c.send(ctx, m.h, m.payload); err != nil {
				s.err.Store(&err)
			}
			cancel()
		}
	}
}

// send is one message's NCCL calls, on the caller's goroutine: the frame header and the
// payload's first chunk as two ncclSend calls in one group, then one ncclSend per
// further p2pChunk of payload.
func (c *conn) send(ctx context.Context, h transport.Header, payload []byte) error {
	l := &c.out
	l.mu.Lock()
	defer l.mu.Unlock()
	cm, err := c.ensure(ctx, l)
	if err != nil {
		return err
	}
	ptr, host := c.stage(l)
	pay, payHost := afterHeader(ptr, host)
	var hdr [transport.FrameHeaderSize]byte
	f := transport.Frame{Header: h, Len: uint64(len(payload))}
	f.Encode(hdr[:])
	what := fmt.Sprintf("send %d bytes to rank %d", len(payload), c.peer)
	first := min(len(payload), p2pChunk)
	if err := c.put(ptr, host, hdr[:]); err != nil {
		return fmt.Errorf("nccl: %s: %w", what, err)
	}
	if err := c.put(pay, payHost, payload[:first]); err != nil {
		return fmt.Errorf("nccl: %s: %w", what, err)
	}
	ops := []groupOp{{kind: opSend, dt: ncclUint8, root: 1, send: ptr, count: transport.FrameHeaderSize}}
	if first > 0 {
		ops = append(ops, groupOp{kind: opSend, dt: ncclUint8, root: 1, send: pay, count: first})
	}
	if err := cm.run(ctx, what, ops); err != nil {
		return c.peerErr(err)
	}
	for off := first; off < len(payload); off += p2pChunk {
		m := min(p2pChunk, len(payload)-off)
		if err := c.put(pay, payHost, payload[off:off+m]); err != nil {
			return fmt.Errorf("nccl: %s: %w", what, err)
		}
		if err := cm.run(ctx, what, []groupOp{{kind: opSend, dt: ncclUint8, root: 1, send: pay, count: m}}); err != nil {
			return c.peerErr(err)
		}
	}
	return nil
}

// recvChunks receives n payload bytes in p2pChunk pieces into l's staging memory after
// the header, handing each piece to use (nil: discard).
func (c *conn) recvChunks(ctx context.Context, cm *comm, l *link, what string, n int, use func(off int, pay uintptr, host []byte) error) error {
	pay, payHost := afterHeader(c.stage(l))
	for off := 0; off < n; off += p2pChunk {
		m := min(p2pChunk, n-off)
		if err := cm.run(ctx, what, []groupOp{{kind: opRecv, dt: ncclUint8, root: 0, recv: pay, count: m}}); err != nil {
			return c.peerErr(err)
		}
		if use != nil {
			var h []byte
			if payHost != nil {
				h = payHost[:m]
			}
			if err := use(off, pay, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// Recv receives the header first and checks it against want before posting the
// payload receive, so a mismatched peer produces a *MismatchError, never a write of the
// wrong size into buf.
func (c *conn) Recv(ctx context.Context, want transport.Header, buf []byte) error {
	if p := c.eager.err.Load(); p != nil {
		return *p
	}
	l := &c.in
	l.mu.Lock()
	defer l.mu.Unlock()
	cm, err := c.ensure(ctx, l)
	if err != nil {
		return err
	}
	ptr, host := c.stage(l)
	what := fmt.Sprintf("recv from rank %d", c.peer)
	if err := cm.run(ctx, what, []groupOp{{kind: opRecv, dt: ncclUint8, root: 0, recv: ptr, count: transport.FrameHeaderSize}}); err != nil {
		return c.peerErr(err)
	}
	var hdr [transport.FrameHeaderSize]byte
	if err := c.get(hdr[:], ptr, host); err != nil {
		return fmt.Errorf("nccl: %s: %w", what, err)
	}
	var f transport.Frame
	if err := f.Decode(hdr[:]); err != nil {
		cm.abort(err)
		return c.peerErr(fmt.Errorf("nccl: %s: %w", what, err))
	}
	if err := f.Check(c.e.local.Rank, c.peer, want, len(buf)); err != nil {
		// The sender is still waiting to deliver its payload, and NCCL cannot tell it
		// the receiver has gone. Receive and discard the payload (its length is in the
		// header) so the sender's Send completes instead of hanging until its timeout.
		if f.Len > 0 && f.Len <= maxDrain {
			_ = c.recvChunks(ctx, cm, l, what+" (discarding a mismatched message)", int(f.Len), nil)
			return err
		}
		if f.Len > 0 {
			cm.abort(err)
		}
		return err
	}
	return c.recvChunks(ctx, cm, l, what, len(buf), func(off int, pay uintptr, h []byte) error {
		m := min(p2pChunk, len(buf)-off)
		if err := c.get(buf[off:off+m], pay, h); err != nil {
			return fmt.Errorf("nccl: %s: %w", what, err)
		}
		return nil
	})
}

// Close aborts both directions' communicators (a blocked Send or Recv returns
// ErrClosed) and frees the staging memory once no call holds it.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		for _, l := range []*link{&c.out, &c.in} {
			// Abort first, without the link lock, to interrupt a blocked call.
			if cm := l.cur.Load(); cm != nil {
				cm.abort(fmt.Errorf("nccl: link to rank %d closed: %w", c.peer, transport.ErrClosed))
			}
		}
		close(c.eager.quit)
		c.setupMu.Lock() // a setup under way finishes (or times out) first
		c.closed = true
		c.setupMu.Unlock()
		for _, l := range []*link{&c.out, &c.in} {
			l.mu.Lock()
			if cm := l.cur.Swap(nil); cm != nil {
				cm.close(c.e.closeTimeout())
			}
			c.freeStage(l)
			l.err = fmt.Errorf("nccl: link to rank %d: %w", c.peer, transport.ErrClosed)
			l.mu.Unlock()
		}
		c.e.forget(c)
	})
	return nil
}
