package inmem

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/goccl/goccl/transport"
)

func pidOf() int { return os.Getpid() }

// queueDepth bounds the messages in flight per direction, so a fast sender blocks
// instead of growing memory without limit.
const queueDepth = 64

type message struct {
	h    transport.Header
	data []byte
}

// pipe is one direction of a pair.
type pipe struct {
	ch     chan message
	closed chan struct{} // closed when the receiving side closes
	once   sync.Once
}

type pair struct {
	key   pairKey
	pipes [2]*pipe // pipes[0] carries lo->hi, pipes[1] hi->lo
	mu    sync.Mutex
	open  int
	ends  [2]*conn
}

func newPair(k pairKey) *pair {
	p := &pair{key: k, open: 2}
	for i := range p.pipes {
		p.pipes[i] = &pipe{ch: make(chan message, queueDepth), closed: make(chan struct{})}
	}
	return p
}

func (p *pair) end(self, peer int) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := 0
	if self == p.key.hi {
		i = 1
	}
	if p.ends[i] == nil {
		p.ends[i] = &conn{pair: p, self: self, peer: peer, out: p.pipes[i], in: p.pipes[1-i]}
	}
	return p.ends[i]
}

type conn struct {
	pair       *pair
	self, peer int
	out, in    *pipe
	closeOnce  sync.Once
	res        *message // the open reservation (transport.Reserver), sender side only
}

func (c *conn) Peer() int { return c.peer }

func (c *conn) Describe() string { return fmt.Sprintf("inmem rank %d <-> rank %d", c.self, c.peer) }

func (c *conn) Send(ctx context.Context, h transport.Header, payload []byte) error {
	return c.queue(ctx, message{h: h, data: append([]byte(nil), payload...)})
}

// queue hands m to the peer.
func (c *conn) queue(ctx context.Context, m message) error {
	select {
	case <-c.in.closed:
		return fmt.Errorf("inmem: send to rank %d: %w", c.peer, transport.ErrClosed)
	case <-c.out.closed:
		return c.peerErr("link closed by peer")
	default:
	}
	select {
	case c.out.ch <- m:
		return nil
	case <-c.out.closed:
		return c.peerErr("link closed by peer")
	case <-c.in.closed:
		return fmt.Errorf("inmem: send to rank %d: %w", c.peer, transport.ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("inmem: send to rank %d: %w", c.peer, ctxErr(ctx))
	}
}

func (c *conn) Recv(ctx context.Context, want transport.Header, buf []byte) error {
	select {
	case m := <-c.in.ch:
		if m.h != want || len(m.data) != len(buf) {
			return &transport.MismatchError{Rank: c.self, Peer: c.peer, Want: want, Got: m.h, WantLen: len(buf), GotLen: len(m.data)}
		}
		copy(buf, m.data)
		return nil
	case <-c.in.closed:
		return fmt.Errorf("inmem: recv from rank %d: %w", c.peer, transport.ErrClosed)
	case <-c.out.closed:
		// The peer closed; drain what it sent before it did.
		select {
		case m := <-c.in.ch:
			if m.h != want || len(m.data) != len(buf) {
				return &transport.MismatchError{Rank: c.self, Peer: c.peer, Want: want, Got: m.h, WantLen: len(buf), GotLen: len(m.data)}
			}
			copy(buf, m.data)
			return nil
		default:
			return c.peerErr("link closed by peer")
		}
	case <-ctx.Done():
		return fmt.Errorf("inmem: recv from rank %d: %w", c.peer, ctxErr(ctx))
	}
}

func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.in.once.Do(func() { close(c.in.closed) })
		p := c.pair
		p.mu.Lock()
		p.open--
		last := p.open == 0
		p.mu.Unlock()
		if last {
			hub.release(p.key)
		}
	})
	return nil
}

func (c *conn) peerErr(msg string) error {
	return &transport.PeerError{Peer: c.peer, Err: fmt.Errorf("inmem: %s: %w", msg, transport.ErrClosed)}
}

func ctxErr(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}

// reserveMax bounds a reservation (transport.Reserver); inmem copies nothing, so any
// message a test would send fits.
const reserveMax = 1 << 30

// ReserveMax implements transport.Reserver.
func (c *conn) ReserveMax() int { return reserveMax }

// Reserve implements transport.Reserver: the payload is a fresh buffer that Commit
// queues as the message, as Send queues its copy.
func (c *conn) Reserve(ctx context.Context, h transport.Header, n int) (first, second []byte, err error) {
	if n < 0 || n > reserveMax {
		return nil, nil, fmt.Errorf("inmem: reserve %d bytes to rank %d: %w: want 0..%d", n, c.peer, transport.ErrInvalid, reserveMax)
	}
	if c.res != nil {
		return nil, nil, fmt.Errorf("inmem: reserve to rank %d: %w: a reservation is open on this link", c.peer, transport.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("inmem: send to rank %d: %w", c.peer, ctxErr(ctx))
	}
	c.res = &message{h: h, data: make([]byte, n)}
	return c.res.data, nil, nil
}

// Advance implements transport.Reserver: inmem delivers whole messages only.
func (c *conn) Advance(int) {}

// Commit implements transport.Reserver.
func (c *conn) Commit(ctx context.Context) error {
	m := c.res
	if m == nil {
		return fmt.Errorf("inmem: commit to rank %d: %w: no reservation", c.peer, transport.ErrInvalid)
	}
	c.res = nil
	return c.queue(ctx, *m)
}

// Abort implements transport.Reserver.
func (c *conn) Abort() { c.res = nil }
