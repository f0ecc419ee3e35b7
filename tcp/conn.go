package tcp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/goccl/goccl/transport"
)

const (
	// smallCopy: payloads up to this size are copied behind the header so that the
	// message leaves in one write; larger ones go out with writev, without a copy.
	smallCopy = 16 << 10
	// streamPiece is the scratch a socket streams a large message through: big enough
	// that fn's per-piece cost and the reads' system calls vanish, small enough to stay
	// in the caches beside fn's operands. 512 KiB against 128: a 64 MiB AllReduce at 2
	// ranks 8-10 % faster in three A/Bs, at 4 ranks 4 % (4 MiB: 8 %) (BENCHMARKS.md,
	// "Speed", 26).
	streamPiece = 512 << 10
	// readBuf sizes socket 0's reader, so a small message's header and payload arrive
	// with one read; larger reads bypass it and land in the caller's buffer.
	readBuf = 64 << 10
)

// conn is one link: sockets[0] carries every header and every small message; a large
// message's payload is cut into len(socks) contiguous parts, part i on socket i, all
// moving at once (stripe.go). Both ends cut the same way, so no per-part header is needed.
type conn struct {
	self, peer int
	host       string
	desc       string
	socks      []net.Conn
	raws       []syscall.RawConn
	br         *bufio.Reader // socket 0's reader
	sr         *spinReader   // under br; nil when tcp.spin is 0
	stripeMin  int
	eager      int // see EagerBytes

	// Send side (one Send at a time, per the Conn contract).
	sbuf   [transport.FrameHeaderSize + smallCopy]byte
	wv     [2][]byte
	iov    [2]syscall.Iovec
	wlanes []lane
	slane  lane          // sendSmall's and TrySend's
	tail   chan struct{} // closed once the rest of a message TrySend began is written; nil: none (trysend.go)
	tails  int           // TrySends that left a tail, for tests
	wio    ioState
	// Recv side (one Recv at a time).
	rhdr      [transport.FrameHeaderSize]byte
	rw        recvWatch
	rio       ioState
	scratch   []byte // unstriped streams
	rlanes    []lane
	scratches [][]byte // per socket, striped streams

	downMu sync.Once

	mu      sync.Mutex
	err     error // why the link is unusable, once it is
	closing bool
	once    sync.Once
}

func newConn(self int, p transport.PeerInfo, socks []net.Conn, stripeMin int, spin time.Duration) (*conn, error) {
	n := len(socks)
	c := &conn{
		self: self, peer: p.Rank, host: p.Host, socks: socks, stripeMin: stripeMin,
		sr:     newSpinReader(socks[0], spin),
		raws:   make([]syscall.RawConn, n),
		wlanes: make([]lane, n), rlanes: make([]lane, n), scratches: make([][]byte, n),
	}
	c.wio.init(c)
	c.rio.init(c)
	if c.sr != nil {
		c.sr.owner = c
		c.br = bufio.NewReaderSize(c.sr, readBuf)
	} else {
		c.br = bufio.NewReaderSize(socks[0], readBuf)
	}
	for i, s := range socks {
		sc, ok := s.(syscall.Conn)
		if !ok {
			return nil, fmt.Errorf("tcp: %w: socket %d to rank %d is a %T, not a socket with a descriptor", transport.ErrInvalid, i, p.Rank, s)
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return nil, fmt.Errorf("tcp: socket %d to rank %d: %w", i, p.Rank, err)
		}
		c.raws[i] = rc
	}
	c.eager = eagerBytes(c.raws)
	c.desc = fmt.Sprintf("tcp %s->%s (rank %d->%d), %d sockets", socks[0].LocalAddr(), socks[0].RemoteAddr(), self, p.Rank, n)
	return c, nil
}

// Bounds of EagerBytes: the contract's floor, and a ceiling past which the algorithms'
// chunks (512 KiB) would not grow anyway.
const (
	minEager = 16 << 10
	maxEager = 1 << 20
)

// EagerBytes implements transport.Eager: a quarter of the smallest send buffer the
// kernel gave the link's sockets (SO_SNDBUF as getsockopt reports it, which already
// counts the kernel's bookkeeping), so that two such messages, headers and skb overhead
// included, sit in the send buffer alone, before the receive buffer takes anything.
// With tcp.bufsize 4 MiB and Linux's limits that is 1 MiB; under Debian's default
// wmem_max (208 KiB, doubled to 416 KiB) about 104 KiB.
func (c *conn) EagerBytes() int { return c.eager }

func eagerBytes(raws []syscall.RawConn) int {
	least := -1
	for _, rc := range raws {
		var n int
		var serr error
		if err := rc.Control(func(fd uintptr) { n, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) }); err != nil || serr != nil {
			return minEager
		}
		if least < 0 || n < least {
			least = n
		}
	}
	return min(max(least/4, minEager), maxEager)
}

func (c *conn) Peer() int        { return c.peer }
func (c *conn) Describe() string { return c.desc }

// striped reports whether an n-byte payload takes the large-message path (stripe.go):
// cut over every socket, moved without blocking; the receiver decides by the same rule.
func (c *conn) striped(n int) bool { return n >= c.stripeMin }

// Send writes one message: header and payload in one write when small, striped when large.
func (c *conn) Send(ctx context.Context, h transport.Header, payload []byte) error {
	if err := c.waitTail(ctx); err != nil {
		return err
	}
	if err := c.unusable("send to"); err != nil {
		return err
	}
	n := len(payload)
	f := transport.Frame{Header: h, Len: uint64(n)}
	if n <= smallCopy && !c.striped(n) {
		return c.sendSmall(ctx, &f, payload)
	}
	stop, fired, err := c.watch(ctx, true)
	if err != nil {
		return fmt.Errorf("tcp: send to rank %d: %w", c.peer, err)
	}
	switch {
	case c.striped(n): // first: the receiver decides by the same rule
		err = c.sendStriped(&f, payload)
	default:
		f.Encode(c.sbuf[:])
		err = c.writev(c.sbuf[:transport.FrameHeaderSize], payload)
	}
	return c.finish(ctx, stop, fired, true, "send to", err)
}

// sendSmall copies the message behind its header and writes it with one non-blocking
// write; the context is armed only if the socket is too full to take it all, so a small
// Send on a link with room (nearly all of them) costs one system call and nothing else.
func (c *conn) sendSmall(ctx context.Context, f *transport.Frame, payload []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("tcp: send to rank %d: %w", c.peer, ctxErr(ctx)) // nothing sent: the link stays usable
	}
	b := c.sbuf[:transport.FrameHeaderSize+len(payload)]
	f.Encode(b)
	copy(b[transport.FrameHeaderSize:], payload)
	l := &c.slane
	*l = lane{p: b}
	m, err := c.ioOnce(0, l, true, false)
	if err == nil && m == len(b) {
		return nil
	}
	var stop func() bool
	var fired chan struct{}
	if err == nil {
		if stop, fired, err = c.watch(ctx, true); err == nil {
			_, err = c.socks[0].Write(l.p)
		}
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
