package tcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/goccl/goccl/transport"
)

const (
	// smallCopy: payloads up to this size are copied behind the header so that the
	// message leaves in one write; larger ones go out with writev, without a copy.
	smallCopy = 16 << 10
	// streamPiece is half of the 256 KiB scratch a socket streams through: one half is
	// being filled while fn works on the other.
	streamPiece = 128 << 10
	// readBuf sizes socket 0's reader, so a small message's header and payload arrive
	// with one read; larger reads bypass it and land in the caller's buffer.
	readBuf = 64 << 10
)

// conn is one link: sockets[0] carries every header and every small message; a large
// message's payload is cut into len(socks) contiguous parts, part i on socket i, all
// moving at once. Both ends cut the same way, so no per-part header is needed.
type conn struct {
	self, peer int
	host       string
	desc       string
	socks      []net.Conn
	br         *bufio.Reader // socket 0's reader
	stripeMin  int

	// Send side (one Send at a time, per the Conn contract).
	sbuf [transport.FrameHeaderSize + smallCopy]byte
	wv   [2][]byte
	// Recv side (one Recv at a time).
	rhdr    [transport.FrameHeaderSize]byte
	scratch []byte // unstriped streams

	writers []*worker // writers[0] is unused: the caller writes socket 0
	readers []*worker // readers[0] (socket 0) runs only for streams
	pieces  chan piece
	quit    chan struct{}
	wg      sync.WaitGroup
	downMu  sync.Once

	mu      sync.Mutex
	err     error // why the link is unusable, once it is
	closing bool
	once    sync.Once
}

func newConn(self int, p transport.PeerInfo, socks []net.Conn, stripeMin int, spin time.Duration) *conn {
	c := &conn{
		self: self, peer: p.Rank, host: p.Host, socks: socks, stripeMin: stripeMin,
		br: bufio.NewReaderSize(newSpinReader(socks[0], spin), readBuf), quit: make(chan struct{}),
	}
	c.desc = fmt.Sprintf("tcp %s->%s (rank %d->%d), %d sockets", socks[0].LocalAddr(), socks[0].RemoteAddr(), self, p.Rank, len(socks))
	if n := len(socks); n > 1 {
		c.pieces = make(chan piece, 3*n)
		c.writers = make([]*worker, n)
		c.readers = make([]*worker, n)
		for i := range n {
			r := io.Reader(socks[i])
			if i == 0 {
				r = c.br
			}
			c.readers[i] = &worker{c: c, r: r, jobs: make(chan job), done: make(chan error, 1), free: make(chan []byte, 2)}
			c.wg.Go(c.readers[i].readLoop)
			if i > 0 {
				c.writers[i] = &worker{c: c, w: socks[i], jobs: make(chan job), done: make(chan error, 1)}
				c.wg.Go(c.writers[i].writeLoop)
			}
		}
	}
	return c
}

func (c *conn) Peer() int        { return c.peer }
func (c *conn) Describe() string { return c.desc }

func (c *conn) striped(n int) bool { return len(c.socks) > 1 && n >= c.stripeMin }

// part is the byte range of part i of an n-byte payload cut into k parts.
func part(n, k, i int) (int, int) { return n * i / k, n * (i + 1) / k }

// Send writes one message: header and payload in one write when small, striped when large.
func (c *conn) Send(ctx context.Context, h transport.Header, payload []byte) error {
	if err := c.unusable("send to"); err != nil {
		return err
	}
	stop, fired, err := c.watch(ctx, true)
	if err != nil {
		return fmt.Errorf("tcp: send to rank %d: %w", c.peer, err)
	}
	n := len(payload)
	f := transport.Frame{Header: h, Len: uint64(n)}
	switch {
	case c.striped(n): // first: the receiver decides by the same rule
		err = c.sendStriped(&f, payload)
	case n <= smallCopy:
		b := c.sbuf[:transport.FrameHeaderSize+n]
		f.Encode(b)
		copy(b[transport.FrameHeaderSize:], payload)
		_, err = c.socks[0].Write(b)
	default:
		f.Encode(c.sbuf[:])
		err = c.writev(c.sbuf[:transport.FrameHeaderSize], payload)
	}
	return c.finish(ctx, stop, fired, true, "send to", err)
}

func (c *conn) writev(a, b []byte) error {
	c.wv[0], c.wv[1] = a, b
	bufs := net.Buffers(c.wv[:])
	_, err := bufs.WriteTo(c.socks[0])
	c.wv[0], c.wv[1] = nil, nil // do not pin the caller's buffer
	return err
}

func (c *conn) sendStriped(f *transport.Frame, payload []byte) error {
	n, k := len(payload), len(c.socks)
	sent := c.dispatch(c.writers, func(i int) job { lo, hi := part(n, k, i); return job{p: payload[lo:hi]} })
	f.Encode(c.sbuf[:])
	_, hi0 := part(n, k, 0)
	err := c.writev(c.sbuf[:transport.FrameHeaderSize], payload[:hi0])
	if err != nil {
		c.shutdown() // unblock the other parts
	}
	return c.collect(c.writers, sent, err)
}

// dispatch hands part i to workers[i] for i >= 1 and returns how many took one.
func (c *conn) dispatch(ws []*worker, mk func(i int) job) int {
	sent := 0
	for i := 1; i < len(ws); i++ {
		select {
		case ws[i].jobs <- mk(i):
			sent++
		case <-c.quit:
			return sent
		}
	}
	return sent
}

// collect waits for the first `sent` workers of the current transfer and merges
// their errors with first, preferring a real cause over the "closed" that follows it.
func (c *conn) collect(ws []*worker, sent int, first error) error {
	for i := 1; i <= sent; i++ {
		first = pickErr(first, <-ws[i].done)
	}
	if sent < len(c.socks)-1 {
		first = pickErr(first, net.ErrClosed)
	}
	return first
}

func pickErr(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case errors.Is(a, net.ErrClosed) && !errors.Is(b, net.ErrClosed):
		return b
	}
	return a
}
