//go:build linux

package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/transport"
)

// scPiece is the unit in which a single-copy message is read for RecvStream: small
// enough to stay in L2 while the callback reduces it, big enough that the system
// call's cost disappears.
const scPiece = 256 << 10

// Recv receives the next message into buf, copying each chunk out of the ring as soon
// as the sender publishes it (or, for a single-copy message, reading straight from the
// sender's memory into buf).
func (c *conn) Recv(ctx context.Context, want transport.Header, buf []byte) error {
	return c.recvInto(ctx, want, buf, false)
}

// RecvCold implements transport.ColdReceiver: Recv, with a ring message's payload
// copied out with non-temporal stores (internal/streamcopy). A single-copy or inline
// message is received as by Recv.
func (c *conn) RecvCold(ctx context.Context, want transport.Header, buf []byte) error {
	return c.recvInto(ctx, want, buf, true)
}

// recvInto is Recv and RecvCold.
func (c *conn) recvInto(ctx context.Context, want transport.Header, buf []byte, cold bool) error {
	if err := c.authenticated(ctx); err != nil {
		return err
	}
	return c.recv(ctx, want, len(buf), buf, nil, cold)
}

// RecvStream hands the next message to fn in pieces. For ring messages the pieces are
// the ring's own memory (no copy); each starts at a multiple of 64 bytes of the message.
func (c *conn) RecvStream(ctx context.Context, want transport.Header, n int, fn func(off int, p []byte) error) error {
	if n < 0 || fn == nil {
		return fmt.Errorf("shm: recv from rank %d: %w: RecvStream needs n >= 0 and a callback (got n=%d)", c.peer, transport.ErrInvalid, n)
	}
	if err := c.authenticated(ctx); err != nil {
		return err
	}
	return c.recv(ctx, want, n, nil, fn, false)
}

// recv delivers into dst when it is non-nil (past the caches with cold), else through fn.
func (c *conn) recv(ctx context.Context, want transport.Header, n int, dst []byte, fn func(int, []byte) error, cold bool) error {
	if !atomic.CompareAndSwapInt32(&c.receiving, 0, 1) {
		return fmt.Errorf("shm: recv from rank %d: %w: concurrent Recv calls on one link", c.peer, transport.ErrInvalid)
	}
	defer c.doneReceiving()
	if err := c.usable("recv from", false); err != nil {
		return err
	}
	kind, err := c.readRecord(ctx, want, n)
	if err != nil {
		return err
	}
	rec := &c.rec
	if kind == kindSingle {
		retry, err := c.recvSingle(*rec, n, dst, fn)
		if !retry {
			return err
		}
		// The kernel refused: the sender resends the payload through the ring.
		if kind, err = c.readRecord(ctx, want, n); err != nil {
			return err
		}
		if kind != kindData {
			return c.fail(fmt.Errorf("shm: recv from rank %d: %w: expected the ring copy after a refused single-copy read, got record kind %d",
				c.peer, transport.ErrProtocol, kind))
		}
	}
	if kind == kindInline {
		if dst != nil {
			copy(dst, rec[recInline:recInline+n])
		} else if n > 0 {
			if err := fn(0, rec[recInline:recInline+n]); err != nil {
				return c.fail(err)
			}
		}
		c.tail += recordBytes
		c.in.release(c.tail)
		return nil
	}
	if kind == kindShort {
		return c.recvShort(n, dst, fn)
	}
	return c.recvRing(ctx, n, dst, fn, cold)
}

// readRecord waits for the next record, copies it to c.rec, checks it against what the
// caller expects and returns its kind. The record stays unreleased in the ring.
func (c *conn) readRecord(ctx context.Context, want transport.Header, n int) (byte, error) {
	kind, err := c.waitRecord(ctx)
	if err != nil {
		return 0, c.opErr("recv from", err) // nothing consumed: the link stays usable
	}
	rec := &c.rec // a private copy (in the conn, so no allocation): the check must hold for what we use
	copy(rec[:], c.in.span(c.tail, recordBytes))
	var f transport.Frame
	if err := f.Decode(rec[:]); err != nil {
		return 0, c.fail(fmt.Errorf("shm: recv from rank %d: %w", c.peer, err))
	}
	if kind < kindData || kind > kindShort || (kind == kindInline && f.Len > inlineMax) || (kind == kindShort && f.Len > shortMax) {
		return 0, c.fail(fmt.Errorf("shm: recv from rank %d: %w: record kind %d with %d bytes", c.peer, transport.ErrProtocol, kind, f.Len))
	}
	if err := f.Check(c.self, c.peer, want, n); err != nil {
		return 0, c.fail(err)
	}
	return kind, nil
}

// recvRing copies (or streams) a kindData payload out of the ring, releasing each
// piece as soon as it is consumed so the sender can reuse the space; a cold copy uses
// non-temporal stores.
func (c *conn) recvRing(ctx context.Context, n int, dst []byte, fn func(int, []byte) error, cold bool) error {
	c.tail += recordBytes
	padded := pad(n)
	chunk := c.opts.ChunkBytes
	for off := 0; off < padded; {
		avail, err := c.waitData(ctx, 1)
		if err != nil {
			return c.giveUp(ctx, c.opErr("recv from", err)) // mid-message: the stream is lost
		}
		p := c.in.span(c.tail, min(int(avail), padded-off, chunk))
		take := len(p)
		if real := min(take, n-off); real > 0 {
			if dst != nil {
				copyStream(dst[off:], p[:real], cold)
			} else if err := fn(off, p[:real]); err != nil {
				return c.fail(err)
			}
		}
		off += take
		c.tail += uint64(take)
		c.in.release(c.tail)
	}
	return nil
}

// recvShort delivers a kindShort payload, complete in the ring since its stamp, in at
// most two pieces (the ring's end may cut it at a multiple of 64 bytes).
func (c *conn) recvShort(n int, dst []byte, fn func(int, []byte) error) error {
	pos := c.tail + recordBytes
	for off := 0; off < n; {
		p := c.in.span(pos+uint64(off), n-off)
		if dst != nil {
			copy(dst[off:], p)
		} else if err := fn(off, p); err != nil {
			return c.fail(err)
		}
		off += len(p)
	}
	c.tail = pos + uint64(pad(n))
	c.in.release(c.tail)
	return nil
}

// recvSingle reads a kindSingle payload from the sender's memory and acks it by
// releasing the record. retry reports that the kernel refused and the payload follows
// through the ring.
func (c *conn) recvSingle(rec [recordBytes]byte, n int, dst []byte, fn func(int, []byte) error) (retry bool, err error) {
	addr := binary.LittleEndian.Uint64(rec[recAddr:])
	delivered := 0 // bytes handed to fn; a refusal after some is not recoverable
	if dst != nil {
		err = readRemote(c.readv, c.peerPid, dst[:n], addr)
	} else {
		if c.scratch == nil {
			c.scratch = make([]byte, scPiece)
		}
		for off := 0; off < n; off += scPiece {
			p := c.scratch[:min(scPiece, n-off)]
			if err = readRemote(c.readv, c.peerPid, p, addr+uint64(off)); err != nil {
				break
			}
			if err := fn(off, p); err != nil {
				return false, c.fail(err)
			}
			delivered += len(p)
		}
	}
	switch {
	case err == nil && c.closedByPeer():
		// The sender gave up (cancelled or closed) while we read: it may have reused
		// the buffer, so what we read cannot be trusted.
		return false, c.fail(c.peerClosed())
	case err == nil:
		c.ack(scDone)
		return false, nil
	case refusedByKernel(err) && delivered == 0 && c.opts.SingleCopy != SingleCopyOn:
		c.ack(scRefused)
		return true, nil
	case refusedByKernel(err) && delivered == 0:
		c.ack(scFatal)
		return false, c.fail(fmt.Errorf("shm: recv from rank %d: %w: process_vm_readv: %w (shm.single_copy=true; auto falls back to the ring)",
			c.peer, transport.ErrNotSupported, err))
	case errors.Is(err, unix.ESRCH) || !c.watch.alive():
		return false, c.fail(&transport.PeerError{Peer: c.peer, Host: c.peerHost,
			Err: fmt.Errorf("shm: process %d exited during a single-copy read: %w", c.peerPid, transport.ErrClosed)})
	case c.closedByPeer():
		return false, c.fail(c.peerClosed())
	}
	return false, c.fail(fmt.Errorf("shm: recv from rank %d: %w: single-copy read of %d bytes at %#x: %w",
		c.peer, transport.ErrProtocol, n, addr, err))
}

// ack reports the outcome of a single-copy read and releases its record, which lets
// the sender return.
func (c *conn) ack(status uint32) {
	atomic.StoreUint32(c.in.scStatus, status)
	c.tail += recordBytes
	c.in.release(c.tail)
}

func (c *conn) closedByPeer() bool { return atomic.LoadUint32(c.seg.closedWord(1-c.side)) != 0 }
