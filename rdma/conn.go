package rdma

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

// probeEvery is how long a side waits without progress before it checks that the peer
// still answers (a zero-length RDMA WRITE: it fails with "retry counter exceeded" when
// the peer is gone, which turns a dead peer into an error instead of a hang).
const probeEvery = 200 * time.Millisecond

// half is the state shared by both directions' progress loops: a CQ and the QPs whose
// completions go to it. Only the goroutine that holds the direction's lock polls it.
type half struct {
	c       *conn
	cq      rc.CQ
	qps     []rc.QP
	qpIndex map[uint32]int
	wcs     []rc.Completion
	err     error // sticky: once set, the direction is unusable
	closed  bool  // the peer sent its close notice
	probing bool
	idle    time.Time
	drain   bool // Close is waiting for this direction's writes; closing does not stop it
	// lenient marks work requests whose failure only matters once this direction needs
	// the peer again; their first error waits in deferred until then.
	lenient  func(id uint64) bool
	deferred error
}

// sender is the sending direction: it receives CTS entries from the peer's receiver into
// fifo and RDMA-writes chunks from stage into the advertised slots.
type sender struct {
	half
	mu      sync.Mutex
	fifo    []byte // credits entries written by the peer
	stage   []byte // credits slots of chunk bytes, the sources of our writes
	busy    []bool // a stage slot whose write has not completed
	credits []cts  // advertised and unused, in order
	nextCTS uint64 // sequence number of the next CTS we expect
	seq     uint64 // chunks posted
	probeTo cts    // where liveness probes go (the peer's landing ring)
}

// receiver is the receiving direction: chunks land in ring; each consumed slot is
// advertised again with a CTS entry written into the peer's FIFO.
type receiver struct {
	half
	mu       sync.Mutex
	ring     []byte
	ctsStage []byte
	filled   []int // bytes written into a slot, -1 while empty
	next     uint64
	peerFifo cts // base address and rkey of the peer's FIFO
}

// conn is one link to a peer. Its resources are released in reverse order by Close.
type conn struct {
	self, peer int
	host       string
	desc       string
	credits    int
	chunk      int
	mr         rc.MR
	tx         sender
	rx         receiver
	closing    atomic.Bool
	closeOnce  sync.Once
	release    func()
}

func (c *conn) Peer() int        { return c.peer }
func (c *conn) Describe() string { return c.desc }

// EagerBytes is the largest message of which two can wait unreceived (transport.Eager):
// a message takes ceil((n+40)/chunk) of the receiver's credits slots, its frame header
// in the first, and both ends have the same credits and chunk (Connect checks).
func (c *conn) EagerBytes() int { return max(0, (c.credits/2)*c.chunk-transport.FrameHeaderSize) }

func (c *conn) peerErr(format string, args ...any) error {
	return &transport.PeerError{Peer: c.peer, Host: c.host, Err: fmt.Errorf("rdma: "+format, args...)}
}

func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}

// wait is one progress step for a direction with nothing to do: check for cancellation,
// probe the peer when it has been quiet, then sleep on the CQ.
func (h *half) wait(ctx context.Context, probe func() error) error {
	if h.c.closing.Load() && !h.drain {
		return fmt.Errorf("rdma: link to rank %d: %w", h.c.peer, transport.ErrClosed)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("rdma: waiting for rank %d: %w", h.c.peer, ctxErr(ctx))
	}
	if h.idle.IsZero() {
		h.idle = time.Now()
	} else if !h.probing && time.Since(h.idle) >= probeEvery {
		if err := probe(); err != nil {
			return err
		}
		h.probing = true
		h.idle = time.Now()
	}
	h.cq.Wait(probeEvery)
	return nil
}

// poll drains the CQ through handle; a failed completion becomes the sticky error.
func (h *half) poll(handle func(wc *rc.Completion) error) (int, error) {
	n, err := h.cq.Poll(h.wcs)
	if err != nil {
		return 0, fmt.Errorf("rdma: poll completions for rank %d: %w", h.c.peer, err)
	}
	for i := 0; i < n; i++ {
		wc := &h.wcs[i]
		if wc.Status != rc.StatusSuccess {
			err := h.c.peerErr("%s completed with status %s (vendor error %#x) on QP %d: %w",
				wrName(wc.ID), wc.Status, wc.VendorErr, wc.QPNum, transport.ErrPeer)
			if h.lenient != nil && h.lenient(wc.ID) {
				if h.deferred == nil {
					h.deferred = err
				}
				continue
			}
			return n, err
		}
		if wrKind(wc.ID) == wrProbe {
			h.probing = false
			continue
		}
		if err := handle(wc); err != nil {
			return n, err
		}
	}
	if n > 0 {
		h.idle = time.Time{}
	}
	return n, nil
}

func wrName(id uint64) string {
	switch wrKind(id) {
	case wrData:
		return "data write"
	case wrCTS:
		return "CTS write"
	case wrProbe:
		return "liveness probe"
	case wrClose:
		return "close notice"
	case wrRecv:
		return "receive"
	}
	return fmt.Sprintf("work request %#x", id)
}

// --- sending ---

func (s *sender) handle(wc *rc.Completion) error {
	switch wc.Opcode {
	case rc.WCWrite:
		if wrKind(wc.ID) == wrData {
			s.busy[wc.ID%uint64(len(s.busy))] = false
		}
	case rc.WCRecvImm:
		kind, slot := splitImm(wc.Imm)
		if err := s.qps[0].PostRecv(wrID(wrRecv, 0), 1); err != nil {
			return fmt.Errorf("rdma: repost receive for rank %d: %w", s.c.peer, err)
		}
		switch kind {
		case immClose:
			s.closed = true
		case immCTS:
			if slot >= s.c.credits {
				return s.c.peerErr("%w: CTS for FIFO entry %d of %d", transport.ErrProtocol, slot, s.c.credits)
			}
			e := getCTS(s.fifo[slot*ctsSize:])
			if e.seq != s.nextCTS+1 || slot != int(s.nextCTS%uint64(s.c.credits)) || e.size == 0 {
				return s.c.peerErr("%w: CTS entry %d advertises chunk %d (size %d), want chunk %d",
					transport.ErrProtocol, slot, e.seq-1, e.size, s.nextCTS)
			}
			s.nextCTS++
			s.credits = append(s.credits, e)
		default:
			return s.c.peerErr("%w: unexpected immediate %#x on the sending QP", transport.ErrProtocol, wc.Imm)
		}
	}
	return nil
}

func (s *sender) probe() error {
	return s.qps[0].PostSend([]rc.SendWR{{ID: wrID(wrProbe, 0), Op: rc.OpWrite, RemoteAddr: s.probeTo.addr, RKey: s.probeTo.rkey, Signaled: true}})
}

// progress runs until ready reports true or the direction fails.
func (s *sender) progress(ctx context.Context, ready func() bool) error {
	for {
		if s.err != nil {
			return s.err
		}
		// Poll before looking at the credits: a failed write or the peer's close notice
		// must stop this send even when credits are left.
		n, err := s.poll(s.handle)
		if err != nil {
			s.err = err
			return err
		}
		if s.closed && !s.drain {
			s.err = s.c.peerErr("link closed by peer while sending: %w", transport.ErrClosed)
			return s.err
		}
		if ready() {
			return nil
		}
		if n > 0 {
			continue
		}
		if err := s.wait(ctx, s.probe); err != nil {
			return err
		}
	}
}

// Send frames the message and writes it chunk by chunk into slots the receiver
// advertised: never more than the receiver's free slots (credits), with up to Credits
// writes in flight.
func (c *conn) Send(ctx context.Context, h transport.Header, payload []byte) error {
	if uint64(len(payload)) > transport.MaxFrameLen {
		return fmt.Errorf("rdma: send to rank %d: %w: %d-byte message exceeds %d", c.peer, transport.ErrInvalid, len(payload), uint64(transport.MaxFrameLen))
	}
	s := &c.tx
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closing.Load() {
		return fmt.Errorf("rdma: send to rank %d: %w", c.peer, transport.ErrClosed)
	}
	defer context.AfterFunc(ctx, s.cq.Wake)()
	f := transport.Frame{Header: h, Len: uint64(len(payload))}
	off, first := 0, true
	for first || off < len(payload) {
		if err := s.progress(ctx, func() bool { return len(s.credits) > 0 && !s.busy[s.seq%uint64(c.credits)] }); err != nil {
			if !first && s.err == nil {
				// Part of the message is out: the stream cannot be resumed.
				s.err = fmt.Errorf("rdma: send to rank %d interrupted after %d of %d bytes: %w", c.peer, off, len(payload), err)
			}
			return err
		}
		cr := s.credits[0]
		s.credits = s.credits[1:]
		slot := int(s.seq % uint64(c.credits))
		dst := s.stage[slot*c.chunk : (slot+1)*c.chunk][:min(int(cr.size), c.chunk)]
		n := 0
		if first {
			f.Encode(dst)
			n = transport.FrameHeaderSize
		}
		k := copy(dst[n:], payload[off:])
		n += k
		off += k
		first = false
		wr := rc.SendWR{ID: wrID(wrData, s.seq), Op: rc.OpWriteImm, Local: c.mr, Offset: c.stageOff() + slot*c.chunk,
			Len: n, RemoteAddr: cr.addr, RKey: cr.rkey, Imm: makeImm(immData, int((cr.seq-1)%uint64(c.credits))), Signaled: true}
		s.busy[slot] = true
		if err := s.qps[s.seq%uint64(len(s.qps))].PostSend([]rc.SendWR{wr}); err != nil {
			s.err = fmt.Errorf("rdma: post write to rank %d: %w", c.peer, err)
			return s.err
		}
		s.seq++
	}
	return s.settle()
}

// settle ends a Send: it surfaces a write that already failed now rather than at the
// next call. A close notice that arrived after every write of the message completed
// does not undo it: the message is in the peer's memory and the peer was told (it took
// it and left, as a rank that calls Abort after its last call does); the next call
// sees the close.
func (s *sender) settle() error {
	if s.err != nil {
		return s.err
	}
	if _, err := s.poll(s.handle); err != nil {
		s.err = err
		return err
	}
	if s.closed && !s.drain && !s.idle() {
		s.err = s.c.peerErr("link closed by peer while sending: %w", transport.ErrClosed)
		return s.err
	}
	return nil
}

// idle reports whether every posted write has completed.
func (s *sender) idle() bool {
	for _, b := range s.busy {
		if b {
			return false
		}
	}
	return true
}

// drain waits (bounded by ctx) until every posted write has completed.
func (s *sender) drainWrites(ctx context.Context) error {
	return s.progress(ctx, s.idle)
}

// --- receiving ---

func (r *receiver) handle(wc *rc.Completion) error {
	switch wc.Opcode {
	case rc.WCRecvImm:
		i, ok := r.qpIndex[wc.QPNum]
		if !ok {
			return r.c.peerErr("%w: completion for unknown QP %d", transport.ErrProtocol, wc.QPNum)
		}
		if err := r.qps[i].PostRecv(wrID(wrRecv, uint64(i)), 1); err != nil {
			return fmt.Errorf("rdma: repost receive for rank %d: %w", r.c.peer, err)
		}
		kind, slot := splitImm(wc.Imm)
		switch {
		case kind == immClose:
			r.closed = true
		case kind == immData && slot < r.c.credits && r.filled[slot] < 0 && int(wc.Len) <= r.c.chunk:
			r.filled[slot] = int(wc.Len)
		default:
			return r.c.peerErr("%w: unexpected write (immediate %#x, %d bytes) on the receiving QP", transport.ErrProtocol, wc.Imm, wc.Len)
		}
	}
	return nil
}

func (r *receiver) probe() error {
	return r.qps[0].PostSend([]rc.SendWR{{ID: wrID(wrProbe, 0), Op: rc.OpWrite, RemoteAddr: r.peerFifo.addr, RKey: r.peerFifo.rkey, Signaled: true}})
}

// advertise tells the sender that the slot for chunk seq is free (RDMA WRITE WITH IMM of
// a CTS entry into the sender's FIFO).
func (r *receiver) advertise(seq uint64) error {
	c := r.c
	slot := int(seq % uint64(c.credits))
	e := cts{addr: c.mr.Addr() + uint64(c.ringOff()+slot*c.chunk), rkey: c.mr.RKey(), size: uint32(c.chunk), seq: seq + 1}
	e.put(r.ctsStage[slot*ctsSize:])
	wr := rc.SendWR{ID: wrID(wrCTS, seq), Op: rc.OpWriteImm, Local: c.mr, Offset: c.ctsOff() + slot*ctsSize, Len: ctsSize,
		RemoteAddr: r.peerFifo.addr + uint64(slot*ctsSize), RKey: r.peerFifo.rkey, Imm: makeImm(immCTS, slot), Signaled: true}
	if err := r.qps[0].PostSend([]rc.SendWR{wr}); err != nil {
		return fmt.Errorf("rdma: post CTS to rank %d: %w", c.peer, err)
	}
	return nil
}

// chunk waits for the next chunk in sequence and returns its bytes (valid until release).
func (r *receiver) nextChunk(ctx context.Context) ([]byte, error) {
	slot := int(r.next % uint64(r.c.credits))
	for {
		if r.err != nil {
			return nil, r.err
		}
		// Poll even when the chunk is already there, so the completions of our CTS
		// writes are reaped and the CQ never overruns.
		n, err := r.poll(r.handle)
		if err != nil {
			r.err = err
			return nil, err
		}
		if r.filled[slot] >= 0 {
			break
		}
		if n > 0 {
			continue
		}
		if r.closed {
			r.err = r.c.peerErr("link closed by peer: %w", transport.ErrClosed)
			return nil, r.err
		}
		if r.deferred != nil {
			r.err = r.deferred
			return nil, r.err
		}
		if err := r.wait(ctx, r.probe); err != nil {
			return nil, err
		}
	}
	return r.ring[slot*r.c.chunk : slot*r.c.chunk+r.filled[slot]], nil
}

func (r *receiver) releaseChunk() error {
	slot := int(r.next % uint64(r.c.credits))
	r.filled[slot] = -1
	r.next++
	if r.closed || r.deferred != nil {
		return nil // the peer sends nothing more; chunks already here are still delivered
	}
	if err := r.advertise(r.next - 1 + uint64(r.c.credits)); err != nil {
		r.err = err
		return err
	}
	return nil
}

func (c *conn) Recv(ctx context.Context, want transport.Header, buf []byte) error {
	return c.RecvStream(ctx, want, len(buf), func(off int, p []byte) error {
		copy(buf[off:], p)
		return nil
	})
}

// RecvStream hands each chunk to fn straight from the landing slot, before the slot is
// advertised again, so a reducing receiver needs no extra copy.
func (c *conn) RecvStream(ctx context.Context, want transport.Header, n int, fn func(off int, p []byte) error) error {
	r := &c.rx
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.closing.Load() {
		return fmt.Errorf("rdma: recv from rank %d: %w", c.peer, transport.ErrClosed)
	}
	if r.err != nil {
		return r.err
	}
	defer context.AfterFunc(ctx, r.cq.Wake)()
	p, err := r.nextChunk(ctx)
	if err != nil {
		return err
	}
	var f transport.Frame
	if err := f.Decode(p); err != nil {
		r.err = c.peerErr("bad frame: %w", err)
		return r.err
	}
	if err := f.Check(c.self, c.peer, want, n); err != nil {
		r.err = err
		return err
	}
	off, piece := 0, p[transport.FrameHeaderSize:]
	for {
		if off+len(piece) > n {
			r.err = c.peerErr("%w: message overruns its %d-byte length", transport.ErrProtocol, n)
			return r.err
		}
		if len(piece) > 0 {
			if err := fn(off, piece); err != nil {
				r.err = err
				return err
			}
		}
		off += len(piece)
		if err := r.releaseChunk(); err != nil {
			return err
		}
		if off == n {
			return nil
		}
		if piece, err = r.nextChunk(ctx); err != nil {
			if r.err == nil {
				// Part of the message was consumed: the stream cannot be resumed.
				r.err = fmt.Errorf("rdma: receive from rank %d interrupted after %d of %d bytes: %w", c.peer, off, n, err)
			}
			return err
		}
	}
}

// Close sends a close notice both ways (after this side's writes completed, so the peer
// sees every message first), then releases the QPs, CQs and memory.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.closing.Store(true)
		c.tx.cq.Wake()
		c.rx.cq.Wake()
		c.tx.mu.Lock()
		c.rx.mu.Lock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.tx.drain = true
		if c.tx.err == nil {
			_ = c.tx.drainWrites(ctx)
		}
		cancel()
		for _, qp := range []rc.QP{c.tx.qps[0], c.rx.qps[0]} {
			_ = qp.PostSend([]rc.SendWR{{ID: wrID(wrClose, 0), Op: rc.OpWriteImm, Imm: makeImm(immClose, 0)}})
		}
		c.release()
		c.rx.mu.Unlock()
		c.tx.mu.Unlock()
	})
	return nil
}

// Layout of the one registered arena a link uses: FIFO | CTS staging | send staging | ring.
func (c *conn) fifoOff() int  { return 0 }
func (c *conn) ctsOff() int   { return c.credits * ctsSize }
func (c *conn) stageOff() int { return 2 * c.credits * ctsSize }
func (c *conn) ringOff() int  { return c.stageOff() + c.credits*c.chunk }
func arenaSize(credits, chunk int) int {
	return 2*credits*ctsSize + 2*credits*chunk
}
