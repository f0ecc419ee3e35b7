package tcp

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/goccl/goccl/transport"
)

// Recv reads the next message straight into buf (no intermediate copy for large ones).
func (c *conn) Recv(ctx context.Context, want transport.Header, buf []byte) error {
	if err := c.unusable("recv from"); err != nil {
		return err
	}
	stop, fired, err := c.watch(ctx, false)
	if err != nil {
		return fmt.Errorf("tcp: recv from rank %d: %w", c.peer, err)
	}
	err = c.readHeader(want, len(buf))
	if err == nil {
		if c.striped(len(buf)) {
			err = c.recvStriped(buf)
		} else {
			_, err = io.ReadFull(c.br, buf)
		}
	}
	return c.finish(ctx, stop, fired, false, "recv from", err)
}

// readHeader reads and checks the frame header; the length is checked against what
// the receiver expects before a single payload byte is read, so a bad length can never
// make this side allocate or overrun.
func (c *conn) readHeader(want transport.Header, n int) error {
	if _, err := io.ReadFull(c.br, c.rhdr[:]); err != nil {
		return err
	}
	var f transport.Frame
	if err := f.Decode(c.rhdr[:]); err != nil {
		return err
	}
	return f.Check(c.self, c.peer, want, n)
}

func (c *conn) recvStriped(buf []byte) error {
	n, k := len(buf), len(c.socks)
	sent := c.dispatch(c.readers, func(i int) job { lo, hi := part(n, k, i); return job{p: buf[lo:hi]} })
	_, hi0 := part(n, k, 0)
	_, err := io.ReadFull(c.br, buf[:hi0])
	if err != nil {
		c.shutdown()
	}
	return c.collect(c.readers, sent, err)
}

// RecvStream implements transport.Streamer: pieces of at most 128 KiB are handed to fn
// as they arrive, each socket filling one half of its scratch while fn has the other.
func (c *conn) RecvStream(ctx context.Context, want transport.Header, n int, fn func(off int, p []byte) error) error {
	if n < 0 {
		return fmt.Errorf("tcp: recv from rank %d: %w: negative length %d", c.peer, transport.ErrInvalid, n)
	}
	if err := c.unusable("recv from"); err != nil {
		return err
	}
	stop, fired, err := c.watch(ctx, false)
	if err != nil {
		return fmt.Errorf("tcp: recv from rank %d: %w", c.peer, err)
	}
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
		c.unwatch(stop, fired, false)
		err = fmt.Errorf("tcp: recv stream from rank %d: %w", c.peer, fnErr)
		c.setErr(err)
		c.shutdown() // the rest of the message is unread: the link cannot continue
		return err
	}
	return c.finish(ctx, stop, fired, false, "recv from", err)
}

func (c *conn) streamPlain(n int, fn func(int, []byte) error) (ioErr, fnErr error) {
	if n > 0 && c.scratch == nil {
		c.scratch = make([]byte, 2*streamPiece)
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

func (c *conn) streamStriped(n int, fn func(int, []byte) error) (ioErr, fnErr error) {
	k := len(c.socks)
	sent := 0
	for i := range k {
		w := c.readers[i]
		if w.scratch == nil {
			w.scratch = make([]byte, 2*streamPiece)
			w.free <- w.scratch[:streamPiece:streamPiece]
			w.free <- w.scratch[streamPiece:]
		}
		lo, hi := part(n, k, i)
		select {
		case w.jobs <- job{stream: true, off: lo, n: hi - lo}:
			sent++
		case <-c.quit:
			ioErr = pickErr(ioErr, errLinkDown)
		}
		if ioErr != nil {
			break
		}
	}
	for ended := 0; ended < sent; {
		pc := <-c.pieces
		if pc.last {
			ended++
			if pc.err != nil {
				ioErr = pickErr(ioErr, pc.err)
				c.shutdown()
			}
			continue
		}
		if ioErr == nil && fnErr == nil {
			if err := fn(pc.off, pc.p); err != nil {
				fnErr = err
				c.shutdown()
			}
		}
		pc.w.free <- pc.p[:cap(pc.p)]
	}
	return ioErr, fnErr
}

// errLinkDown is what a worker reports when the link shut down under it; like a closed
// socket it yields to the error that caused the shutdown.
var errLinkDown = fmt.Errorf("link shut down: %w", net.ErrClosed)

// job is one part of one message for a worker.
type job struct {
	p      []byte // the part (plain reads and writes)
	stream bool   // stream the part through the worker's scratch instead
	off, n int    // the part's range, for streams
}

// piece is a streamed chunk, or (last) the end of a worker's part.
type piece struct {
	w    *worker
	off  int
	p    []byte
	last bool
	err  error
}

// worker is a long-lived goroutine that moves one socket's part of each large
// message, so a striped transfer costs channel hand-offs, not goroutine spawns.
type worker struct {
	c       *conn
	r       io.Reader
	w       io.Writer
	jobs    chan job
	done    chan error
	free    chan []byte
	scratch []byte
}

func (w *worker) writeLoop() {
	for {
		select {
		case j := <-w.jobs:
			_, err := w.w.Write(j.p)
			if err != nil {
				w.c.shutdown()
			}
			w.done <- err
		case <-w.c.quit:
			return
		}
	}
}

func (w *worker) readLoop() {
	for {
		select {
		case j := <-w.jobs:
			if j.stream {
				err := w.stream(j)
				if err != nil {
					w.c.shutdown()
				}
				w.c.pieces <- piece{w: w, last: true, err: err}
				continue
			}
			_, err := io.ReadFull(w.r, j.p)
			if err != nil {
				w.c.shutdown()
			}
			w.done <- err
		case <-w.c.quit:
			return
		}
	}
}

func (w *worker) stream(j job) error {
	for done := 0; done < j.n; {
		var b []byte
		select {
		case b = <-w.free:
		case <-w.c.quit:
			return errLinkDown
		}
		k := min(len(b), j.n-done)
		if _, err := io.ReadFull(w.r, b[:k]); err != nil {
			w.free <- b
			return err
		}
		w.c.pieces <- piece{w: w, off: j.off + done, p: b[:k]}
		done += k
	}
	return nil
}
