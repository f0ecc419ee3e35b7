package tcp

import (
	"context"
	"fmt"
	"io"

	"github.com/goccl/goccl/transport"
)

// Recv reads the next message straight into buf (no intermediate copy for large ones).
func (c *conn) Recv(ctx context.Context, want transport.Header, buf []byte) error {
	if err := c.unusable("recv from"); err != nil {
		return err
	}
	w, err := c.watchRecv(ctx, len(buf))
	if err != nil {
		return fmt.Errorf("tcp: recv from rank %d: %w", c.peer, err)
	}
	defer c.endRecv()
	err = c.readHeader(want, len(buf))
	if err == nil {
		if c.striped(len(buf)) {
			err = c.recvStriped(buf)
		} else {
			_, err = io.ReadFull(c.br, buf)
		}
	}
	return c.finish(ctx, w.stop, w.fired, false, "recv from", err)
}

// recvWatch is the context watch of one receive, armed at once for a large message
// and only before the first park for a small one (see spinReader).
type recvWatch struct {
	stop  func() bool
	fired chan struct{}
}

func (c *conn) watchRecv(ctx context.Context, n int) (*recvWatch, error) {
	w := &c.rw
	*w = recvWatch{}
	if c.sr == nil || c.striped(n) || ctx.Done() == nil {
		var err error
		w.stop, w.fired, err = c.watch(ctx, false)
		return w, err
	}
	if ctx.Err() != nil {
		return w, ctxErr(ctx) // nothing read yet: the link stays usable
	}
	c.sr.ctx, c.sr.armed = ctx, false
	return w, nil
}

// endRecv drops what watchRecv left in the spin reader, so it pins no context.
func (c *conn) endRecv() {
	if c.sr != nil {
		c.sr.ctx = nil
	}
}

// readHeader reads and checks the frame header; the length is checked against what
// the receiver expects before a single payload byte is read, so a bad length can never
// make this side allocate or overrun.
func (c *conn) readHeader(want transport.Header, n int) error {
	if c.sr != nil {
		c.sr.park = c.striped(n)
	}
	if _, err := io.ReadFull(c.br, c.rhdr[:]); err != nil {
		return err
	}
	var f transport.Frame
	if err := f.Decode(c.rhdr[:]); err != nil {
		return err
	}
	return f.Check(c.self, c.peer, want, n)
}

// RecvStream implements transport.Streamer: pieces of at most streamPiece are handed to fn
// as they arrive, in the calling goroutine, each cut on a 64-byte boundary of the message.
func (c *conn) RecvStream(ctx context.Context, want transport.Header, n int, fn func(off int, p []byte) error) error {
	if n < 0 {
		return fmt.Errorf("tcp: recv from rank %d: %w: negative length %d", c.peer, transport.ErrInvalid, n)
	}
	if err := c.unusable("recv from"); err != nil {
		return err
	}
	w, err := c.watchRecv(ctx, n)
	if err != nil {
		return fmt.Errorf("tcp: recv from rank %d: %w", c.peer, err)
	}
	defer c.endRecv()
	var fnErr error
	err = c.readHeader(want, n)
	if err == nil {
		if c.striped(n) {
			err, fnErr = c.streamStriped(n, fn)
		} else {
			err, fnErr = c.streamPlain(n, fn)
		}
	}
	if fnErr != nil {
		c.unwatch(w.stop, w.fired, false)
		err = fmt.Errorf("tcp: recv stream from rank %d: %w", c.peer, fnErr)
		c.setErr(err)
		c.shutdown() // the rest of the message is unread: the link cannot continue
		return err
	}
	return c.finish(ctx, w.stop, w.fired, false, "recv from", err)
}

func (c *conn) streamPlain(n int, fn func(int, []byte) error) (ioErr, fnErr error) {
	if n > 0 && c.scratch == nil {
		c.scratch = make([]byte, streamPiece)
	}
	for off := 0; off < n; {
		k := min(len(c.scratch), n-off)
		if _, err := io.ReadFull(c.br, c.scratch[:k]); err != nil {
			return err, nil
		}
		if err := fn(off, c.scratch[:k]); err != nil {
			return nil, err
		}
		off += k
	}
	return nil, nil
}
