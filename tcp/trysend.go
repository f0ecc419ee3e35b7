package tcp

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/transport"
)

// TrySend implements transport.TrySender: a message of at most 16 KiB goes out with
// one non-blocking write when socket 0 takes it at once, and the caller (goccl's fast
// paths, and the sends of a batch, an AllToAllV or a SendRecv) need not hand it to a
// goroutine or arm a deadline for it. A socket with no room takes nothing: sent is
// false and nothing moved. One with room for part of the message (its buffer almost
// full of what the peer has not read) takes that part; the rest is already promised to
// the stream, so a goroutine writes it (tail) and TrySend reports the message sent.
// Every later send on the link waits for that goroutine first. The tail cannot wait
// for this side: like a send of a batch's lane, it needs only the peer to read.
func (c *conn) TrySend(h transport.Header, payload []byte) (bool, error) {
	n := len(payload)
	if n > smallCopy || c.striped(n) || !c.tailDone() {
		return false, nil
	}
	if err := c.unusable("send to"); err != nil {
		return false, err
	}
	b := c.sbuf[:transport.FrameHeaderSize+n]
	f := transport.Frame{Header: h, Len: uint64(n)}
	f.Encode(b)
	copy(b[transport.FrameHeaderSize:], payload)
	l := &c.slane
	*l = lane{p: b}
	m, err := c.ioOnce(0, l, true, false)
	switch {
	case err != nil:
		return false, c.finish(context.Background(), nil, nil, true, "send to", err)
	case m == 0:
		return false, nil
	case m < len(b):
		c.tails++
		done := make(chan struct{})
		c.tail = done
		rest := l.p // in sbuf, which no send touches until the tail is out (tailDone, waitTail)
		go func() {
			defer close(done)
			_, err := c.socks[0].Write(rest)
			if err != nil {
				_ = c.finish(context.Background(), nil, nil, true, "send to", err)
			}
		}()
	}
	return true, nil
}

// Flush implements transport.TrySender: a TrySend's write has already left.
func (c *conn) Flush() {}

// tailDone reports whether no TrySend's tail is still being written.
func (c *conn) tailDone() bool {
	if c.tail == nil {
		return true
	}
	select {
	case <-c.tail:
		c.tail = nil
		return true
	default:
		return false
	}
}

// waitTail waits until a TrySend's tail is out; the caller's send starts after it. A
// context that ends first fails the send with nothing of it sent, the link usable.
func (c *conn) waitTail(ctx context.Context) error {
	if c.tailDone() {
		return nil
	}
	select {
	case <-c.tail:
		c.tail = nil
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tcp: send to rank %d: %w", c.peer, ctxErr(ctx))
	}
}
