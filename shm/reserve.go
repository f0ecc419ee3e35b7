//go:build linux

package shm

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/goccl/goccl/transport"
)

// Reservations (transport.Reserver): the sender writes a message's payload straight into
// the ring. Reserve waits for room for the record and the padded payload, and returns
// the payload's span in the ring, split where it wraps; the first Advance (or Commit)
// stamps the record, and each Advance publishes the payload written so far in whole
// records' worth (64 bytes), as Send publishes chunk by chunk, so the receiver sees an
// ordinary kindData message and streams it behind the writer. The sending guard stays
// held from Reserve to Commit, so no other Send can write into the ring, and Close keeps
// the mapping while it is held.

// ReserveMax is a quarter of the ring less a record: with that bound a reserving rank
// never waits for room that only its own unread messages could free (the two-rank ring
// holds at most three chunks unread per direction; algos/ring's fused step).
func (c *conn) ReserveMax() int { return c.seg.ring/4 - recordBytes }

// Reserve implements transport.Reserver.
func (c *conn) Reserve(ctx context.Context, h transport.Header, n int) (first, second []byte, err error) {
	if n < 0 || n > c.ReserveMax() {
		return nil, nil, fmt.Errorf("shm: reserve %d bytes to rank %d: %w: want 0..%d (a quarter of shm.ring_bytes, less a record)",
			n, c.peer, transport.ErrInvalid, c.ReserveMax())
	}
	if !atomic.CompareAndSwapInt32(&c.sending, 0, 1) {
		return nil, nil, fmt.Errorf("shm: reserve to rank %d: %w: concurrent sends on one link", c.peer, transport.ErrInvalid)
	}
	fail := func(err error) ([]byte, []byte, error) {
		c.doneSending()
		return nil, nil, err
	}
	if err := c.authenticated(ctx); err != nil {
		return fail(err)
	}
	if err := c.usable("send to", true); err != nil {
		return fail(err)
	}
	if err := c.waitSpace(ctx, uint64(recordBytes+pad(n))); err != nil {
		return fail(c.opErr("send to", err))
	}
	f := transport.Frame{Header: h, Len: uint64(n)}
	f.Encode(c.resRec[:])
	c.resN, c.resShown, c.reserved = n, -1, true
	first = c.out.span(c.head+recordBytes, n)
	if len(first) < n {
		second = c.out.data[:n-len(first)]
	}
	return first, second, nil
}

// Advance implements transport.Reserver: the record's stamp if not yet stored, then
// head past the payload's first k bytes, rounded down to a record. The caller's stores
// into the span come first: the stamp and head are fenced stores, which order them,
// non-temporal ones included (the reduce kernels also end with SFENCE).
func (c *conn) Advance(k int) {
	if !c.reserved {
		return
	}
	k = min(k, c.resN) &^ (recordBytes - 1)
	if c.resShown < 0 {
		c.out.putRecord(c.head, &c.resRec, kindData)
		c.resShown = 0
	}
	if k > c.resShown {
		c.resShown = k
		c.out.publish(c.head + recordBytes + uint64(k))
	}
}

// Commit implements transport.Reserver: the whole payload published, head moved past it.
func (c *conn) Commit(context.Context) error {
	if !c.reserved {
		return fmt.Errorf("shm: commit to rank %d: %w: no reservation", c.peer, transport.ErrInvalid)
	}
	defer c.doneSending()
	if err := c.usable("send to", true); err != nil {
		c.reserved = false
		return err
	}
	c.Advance(0) // the stamp, if no Advance stored it
	c.reserved = false
	c.head += uint64(recordBytes + pad(c.resN))
	c.out.publish(c.head)
	return nil
}

// Abort implements transport.Reserver: before any Advance nothing was published and the
// ring is as it was; after one the peer holds part of a message that will not be
// finished, and the link fails.
func (c *conn) Abort() {
	if !c.reserved {
		return
	}
	c.reserved = false
	if c.resShown >= 0 {
		_ = c.fail(fmt.Errorf("shm: send to rank %d: %w: a message was dropped after part of it was published", c.peer, transport.ErrProtocol))
	}
	c.doneSending()
}
