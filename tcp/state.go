package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/goccl/goccl/transport"
)

// watch arms ctx: when it ends, every socket's read (or write) deadline is set in the
// past, which unblocks the transfer wherever it is. Context-free calls pay nothing.
func (c *conn) watch(ctx context.Context, write bool) (func() bool, chan struct{}, error) {
	if ctx.Done() == nil {
		return nil, nil, nil
	}
	if ctx.Err() != nil {
		return nil, nil, ctxErr(ctx) // nothing moved yet: the link stays usable
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.setDeadlines(write, time.Unix(1, 0))
		close(fired)
	})
	return stop, fired, nil
}

// unwatch disarms ctx and reports whether it fired; if it did, the deadlines are
// cleared again so a transfer that finished anyway leaves a usable link.
func (c *conn) unwatch(stop func() bool, fired chan struct{}, write bool) bool {
	if stop == nil || stop() {
		return false
	}
	<-fired
	c.setDeadlines(write, time.Time{})
	return true
}

func (c *conn) setDeadlines(write bool, t time.Time) {
	for _, s := range c.socks {
		if write {
			_ = s.SetWriteDeadline(t)
		} else {
			_ = s.SetReadDeadline(t)
		}
	}
}

// finish turns a transfer's outcome into the error to return. Any failure breaks the
// link for good (the byte stream is at an unknown position) and closes its sockets, so
// the peer notices instead of blocking on a link nobody reads: at once, or giveUpGrace
// later when this side gave up.
func (c *conn) finish(ctx context.Context, stop func() bool, fired chan struct{}, write bool, op string, err error) error {
	cancelled := c.unwatch(stop, fired, write)
	if err == nil {
		return nil
	}
	var me *transport.MismatchError
	gaveUp := false
	switch {
	case errors.As(err, &me):
		// Returned as is, so callers can inspect both sides.
	case cancelled || ctx.Err() != nil && errors.Is(err, ctx.Err()):
		err = fmt.Errorf("tcp: %s rank %d: %w", op, c.peer, ctxErr(ctx))
		gaveUp = true
	case c.isClosing():
		err = fmt.Errorf("tcp: %s rank %d: link %w", op, c.peer, transport.ErrClosed)
	case errors.Is(err, transport.ErrProtocol):
		err = &transport.PeerError{Peer: c.peer, Host: c.host, Err: fmt.Errorf("tcp: %s %s: %w", op, c.socks[0].RemoteAddr(), err)}
	default:
		cause := err
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			cause = fmt.Errorf("the peer closed the link (%w)", err)
		}
		err = &transport.PeerError{Peer: c.peer, Host: c.host, Err: fmt.Errorf("tcp: %s %s: link lost: %w", op, c.socks[0].RemoteAddr(), cause)}
	}
	c.setErr(err)
	if gaveUp {
		// This side stopped half-way because its operation failed elsewhere (a tree
		// node's send to one child, when the other child died) or its caller gave up.
		// The peer would take the closed link for this rank's failure, and could reach
		// the communicator's record of the cause first (goccl's agreeCause), naming
		// this rank. A short grace lets this rank record the real cause first; the link
		// is already broken for every later call on this side.
		time.AfterFunc(giveUpGrace, c.shutdown)
		return err
	}
	c.shutdown()
	return err
}

// giveUpGrace is how long a link this side gave up on stays open before the peer is
// told (finish): far longer than a store round trip, far shorter than any timeout.
const giveUpGrace = 25 * time.Millisecond

func (c *conn) setErr(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// unusable returns the error a call on a broken or closed link gets.
func (c *conn) unusable(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closing:
		return fmt.Errorf("tcp: %s rank %d: link %w", op, c.peer, transport.ErrClosed)
	case c.err != nil:
		return fmt.Errorf("tcp: %s rank %d: link unusable after an earlier error: %w", op, c.peer, c.err)
	}
	return nil
}

// shutdown closes the sockets, which unblocks any transfer on them; idempotent.
func (c *conn) shutdown() {
	c.downMu.Do(func() {
		for _, s := range c.socks {
			_ = s.Close()
		}
	})
}

// Close tears the link down; blocked calls on this side return ErrClosed and the peer
// sees the link lost. The one goroutine a link may start, the tail of a TrySend
// (trysend.go), ends with its write, at the latest when the sockets close here.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		c.shutdown()
	})
	return nil
}
