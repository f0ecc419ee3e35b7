package tcp

import (
	"io"
	"net"
	"syscall"

	"github.com/goccl/goccl/transport"
)

// A large message (at least tcp.stripe_min bytes) is cut into one part per socket and
// the calling goroutine moves every part itself: it writes (or reads) whichever sockets
// are ready without blocking, round after round, and parks on the netpoller only when
// none is. An earlier version handed each part to a goroutine per socket; on 2 cores the
// hand-offs cost a futex wake-up and a context switch each (about 900 futex, nanosleep
// and epoll calls per 64 MiB AllReduce at 2 ranks, see .proposals/tcp-bench.md), more
// than the parallel copies gained, since every core already runs a sender and a
// receiver.

// partAlign aligns the cuts between parts, so that every part, and every piece a stream
// delivers, starts on an element boundary of every dtype (at most 8 bytes) and on a
// cache line.
const partAlign = 64

// part is the byte range of part i of an n-byte payload cut into k parts.
func part(n, k, i int) (int, int) { return cut(n, k, i), cut(n, k, i+1) }

func cut(n, k, i int) int {
	if i >= k {
		return n
	}
	return n * i / k &^ (partAlign - 1)
}

// lane is one socket's part of the message in flight.
type lane struct {
	hdr    []byte // send: header bytes still to write (socket 0 only)
	p      []byte // send: payload bytes still to write; recv: room still to fill
	off    int    // stream: message offset of scratch[0]
	end    int    // stream: message offset where this part ends
	fill   int    // stream: bytes in scratch not yet handed to fn
	buf    []byte // stream: this socket's scratch
	active bool
}

func (l *lane) left() int { return len(l.hdr) + len(l.p) }

// ioOnce does one non-blocking write or read on socket i. With wait it parks on the
// netpoller until the socket is ready (or its deadline passes, or it closes) instead of
// reporting that it would block. It returns the bytes moved; (0, nil) means it would
// block, (0, io.ErrUnexpectedEOF) that the peer closed the stream. A write consumes
// what it wrote from l; a read leaves l to the caller.
func (c *conn) ioOnce(i int, l *lane, write, wait bool) (int, error) {
	st := &c.rio
	if write {
		st = &c.wio
	}
	st.l, st.write, st.wait = l, write, wait
	var err error
	if write {
		err = c.raws[i].Write(st.fn)
	} else {
		err = c.raws[i].Read(st.fn)
	}
	n, serr, again := st.n, st.serr, st.again
	st.l = nil
	switch {
	case err != nil:
		return 0, err // closed, or the deadline that cancellation set
	case again:
		return 0, nil
	case serr != nil:
		op := "read"
		if write {
			op = "write"
		}
		return 0, &net.OpError{Op: op, Net: "tcp", Source: c.socks[i].LocalAddr(), Addr: c.socks[i].RemoteAddr(), Err: serr}
	case n <= 0 && !write:
		return 0, io.ErrUnexpectedEOF // a read of 0 bytes that would not block: the peer closed
	}
	return n, nil
}

// ioState is the state of one ioOnce, kept in the conn (one for the send side, one for
// the receive side) with its callback bound once, so a call allocates nothing.
type ioState struct {
	c           *conn
	l           *lane
	write, wait bool
	n           int
	serr        error
	again       bool
	fn          func(fd uintptr) bool
}

func (st *ioState) init(c *conn) {
	st.c = c
	st.fn = st.do
}

func (st *ioState) do(fd uintptr) bool {
	for {
		if st.write {
			st.n, st.serr = st.c.writeLane(int(fd), st.l)
		} else {
			st.n, st.serr = rawRead(int(fd), st.l.p)
		}
		st.again = st.serr == syscall.EAGAIN
		if st.serr != syscall.EINTR {
			return !st.again || !st.wait
		}
	}
}

// writeLane writes the lane's header and payload with one writev and consumes what went.
func (c *conn) writeLane(fd int, l *lane) (int, error) {
	iov := &c.iov
	cnt, bytes := 0, 0
	for _, b := range [2][]byte{l.hdr, l.p} {
		if len(b) > 0 {
			iov[cnt].Base = &b[0]
			iov[cnt].SetLen(len(b))
			cnt++
			bytes += len(b)
		}
	}
	r, e := rawWritev(fd, &iov[0], cnt, bytes)
	*iov = [2]syscall.Iovec{} // do not keep the caller's buffer reachable
	if e != 0 {
		return 0, e
	}
	n := int(r)
	h := min(n, len(l.hdr))
	l.hdr = l.hdr[h:]
	l.p = l.p[n-h:]
	return n, nil
}

// sendStriped writes header and parts; the header leads part 0 on socket 0.
func (c *conn) sendStriped(f *transport.Frame, payload []byte) error {
	n, k := len(payload), len(c.socks)
	f.Encode(c.sbuf[:])
	lanes := c.wlanes
	for i := range lanes {
		lo, hi := part(n, k, i)
		lanes[i] = lane{p: payload[lo:hi]}
	}
	lanes[0].hdr = c.sbuf[:transport.FrameHeaderSize]
	defer clear(lanes) // do not pin the caller's buffer
	return c.pump(lanes, true, nil)
}

// recvStriped reads the parts of a message, its header already read, straight into buf.
func (c *conn) recvStriped(buf []byte) error {
	n, k := len(buf), len(c.socks)
	lanes := c.rlanes
	for i := range lanes {
		lo, hi := part(n, k, i)
		lanes[i] = lane{p: buf[lo:hi]}
	}
	defer clear(lanes)
	// Socket 0's reader may already hold the start of part 0.
	if b := min(c.br.Buffered(), len(lanes[0].p)); b > 0 {
		_, _ = io.ReadFull(c.br, lanes[0].p[:b]) // cannot fail: the bytes are buffered
		lanes[0].p = lanes[0].p[b:]
	}
	return c.pump(lanes, false, nil)
}

// streamStriped reads the parts through each socket's scratch and hands them to fn in
// pieces that end on partAlign boundaries (or at the end of a part), so fn never sees
// a split element.
func (c *conn) streamStriped(n int, fn func(int, []byte) error) (ioErr, fnErr error) {
	k := len(c.socks)
	lanes := c.rlanes
	for i := range lanes {
		if c.scratches[i] == nil {
			c.scratches[i] = make([]byte, streamPiece)
		}
		lo, hi := part(n, k, i)
		lanes[i] = lane{off: lo, end: hi, buf: c.scratches[i]}
		lanes[i].p = lanes[i].room()
	}
	defer clear(lanes)
	if b := min(c.br.Buffered(), len(lanes[0].p)); b > 0 {
		_, _ = io.ReadFull(c.br, lanes[0].p[:b])
		lanes[0].fill += b
		lanes[0].p = lanes[0].p[b:]
	}
	var ferr error
	deliver := func(l *lane, all bool) error {
		if l.fill == 0 {
			return nil
		}
		d := l.fill
		if !all && l.off+d < l.end {
			d = (l.off+d)&^(partAlign-1) - l.off
			if d <= 0 {
				return nil
			}
		}
		if err := fn(l.off, l.buf[:d]); err != nil {
			ferr = err
			return err
		}
		copy(l.buf, l.buf[d:l.fill])
		l.fill -= d
		l.off += d
		l.p = l.room()
		return nil
	}
	err := c.pump(lanes, false, deliver)
	if ferr != nil {
		return nil, ferr
	}
	return err, nil
}

// room is where a stream lane's next read lands: the rest of the scratch, at most up to
// the end of the part.
func (l *lane) room() []byte {
	return l.buf[l.fill:min(len(l.buf), l.end-l.off)]
}

// pump moves every lane to completion. For plain transfers a lane is done when its p
// (and hdr) are empty. For streams (deliver != nil) a read lands in the scratch; a full
// scratch or a finished part is delivered at once, and partial scratches are delivered
// (aligned) before the goroutine parks, so fn works while the data is still coming.
//
// Parking on any one unfinished socket cannot deadlock: the peer, too, moves every
// socket that is ready before it parks, so a socket this side waits on either has bytes
// in flight or gets them once the peer is unblocked by what this side just moved.
func (c *conn) pump(lanes []lane, write bool, deliver func(*lane, bool) error) error {
	p := pumper{c: c, lanes: lanes, write: write, deliver: deliver}
	for i := range lanes {
		if p.done(&lanes[i]) {
			continue
		}
		lanes[i].active = true
		p.pending++
	}
	for p.pending > 0 {
		moved := false
		for i := range lanes {
			if !lanes[i].active {
				continue
			}
			n, err := p.step(i, false)
			if err != nil {
				return err
			}
			moved = moved || n > 0
		}
		if p.pending == 0 || moved {
			continue
		}
		// Nothing was ready: hand what has come to fn, then park on the socket with the
		// most left to move.
		best := -1
		for i := range lanes {
			l := &lanes[i]
			if !l.active {
				continue
			}
			if deliver != nil {
				if err := deliver(l, false); err != nil {
					return err
				}
				if p.finish(l) {
					continue
				}
			}
			if best < 0 || p.remaining(l) > p.remaining(&lanes[best]) {
				best = i
			}
		}
		if best >= 0 {
			if _, err := p.step(best, true); err != nil {
				return err
			}
		}
	}
	return nil
}

type pumper struct {
	c       *conn
	lanes   []lane
	write   bool
	deliver func(*lane, bool) error
	pending int
}

// step moves what socket i has room or data for (waiting for it when wait is set).
func (p *pumper) step(i int, wait bool) (int, error) {
	l := &p.lanes[i]
	if p.deliver != nil && len(l.p) == 0 {
		// A scratch full of undelivered bytes: counts as progress once delivered.
		if err := p.deliver(l, true); err != nil {
			return 0, err
		}
		p.finish(l)
		return 1, nil
	}
	n, err := p.c.ioOnce(i, l, p.write, wait)
	if err != nil || n == 0 {
		return 0, err
	}
	if !p.write {
		l.p = l.p[n:]
		if p.deliver != nil {
			l.fill += n
			if len(l.p) == 0 {
				if err := p.deliver(l, true); err != nil {
					return 0, err
				}
			}
		}
	}
	p.finish(l)
	return n, nil
}

// finish retires a lane that has nothing left and reports whether it did.
func (p *pumper) finish(l *lane) bool {
	if !l.active || !p.done(l) {
		return false
	}
	l.active = false
	p.pending--
	return true
}

func (p *pumper) done(l *lane) bool {
	if p.deliver != nil {
		return l.off == l.end && l.fill == 0
	}
	return l.left() == 0
}

func (p *pumper) remaining(l *lane) int {
	if p.deliver != nil {
		return l.end - l.off - l.fill
	}
	return l.left()
}
