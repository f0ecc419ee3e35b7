package goccl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goccl/goccl/transport"
)

// Work is a queued operation. Wait for it before touching its buffers.
type Work struct {
	ctx   context.Context
	run   func(ctx context.Context, w *Work) error
	desc  fmt.Stringer // for the flight recorder and trace; formatted only when read
	bytes int          // user bytes, for Stats
	algo  string       // set by the operation when it knows
	done  chan struct{}
	err   error
}

// Wait blocks until the operation finished (or ctx ends) and returns its error.
func (w *Work) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return fmt.Errorf("goccl: waiting for an operation: %w", ctxErr(ctx))
	}
}

// Done is closed when the operation has finished.
func (w *Work) Done() <-chan struct{} { return w.done }

// Err is the operation's error; valid after Done is closed.
func (w *Work) Err() error { return w.err }

func doneWork(err error) *Work {
	w := &Work{done: make(chan struct{}), err: err}
	close(w.done)
	return w
}

// submit queues an operation; it runs on the communicator's loop in issue order.
func (c *Comm) submit(ctx context.Context, desc fmt.Stringer, bytes int, run func(ctx context.Context, w *Work) error) *Work {
	w := &Work{ctx: ctx, run: run, desc: desc, bytes: bytes, done: make(chan struct{})}
	c.mu.Lock()
	closed, err := c.closed, c.err
	c.mu.Unlock()
	if closed {
		return doneWork(fmt.Errorf("goccl: rank %d: %w: communicator closed", c.rank, transport.ErrClosed))
	}
	if err != nil {
		return doneWork(err)
	}
	c.pending.Add(1)
	c.flight.queued(w, desc)
	select {
	case c.queue <- w:
		return w
	case <-c.quit:
		c.pending.Add(-1)
		c.flight.forget(w)
		return doneWork(fmt.Errorf("goccl: rank %d: %w: communicator closed", c.rank, transport.ErrClosed))
	case <-ctx.Done():
		c.pending.Add(-1)
		c.flight.forget(w)
		return doneWork(fmt.Errorf("goccl: rank %d: queueing an operation: %w", c.rank, ctxErr(ctx)))
	}
}

// runSync runs an operation and waits for it. When nothing is queued or running it
// runs on the caller's goroutine: exec is held first and pending claimed from 0, so no
// earlier operation can be waiting (issue order holds) and the loop cannot start a later
// one until this returns.
func (c *Comm) runSync(ctx context.Context, desc fmt.Stringer, bytes int, run func(ctx context.Context, w *Work) error) error {
	if c.execMu.TryLock() {
		if c.pending.CompareAndSwap(0, 1) {
			c.mu.Lock()
			closed, err := c.closed, c.err
			c.mu.Unlock()
			switch {
			case closed:
				err = fmt.Errorf("goccl: rank %d: %w: communicator closed", c.rank, transport.ErrClosed)
			case err == nil:
				w := &Work{ctx: ctx, run: run, desc: desc, bytes: bytes, done: make(chan struct{})}
				c.flight.queued(w, desc)
				c.execute(w)
				err = w.err
			}
			c.pending.Add(-1)
			c.execMu.Unlock()
			return err
		}
		c.execMu.Unlock()
	}
	return c.submit(ctx, desc, bytes, run).Wait(ctx)
}

// loop runs queued operations one at a time until Close.
func (c *Comm) loop() {
	defer close(c.loopDone)
	for {
		select {
		case w := <-c.queue:
			c.runQueued(w)
		case <-c.quit:
			// Finish what was queued before Close, then stop.
			for {
				select {
				case w := <-c.queue:
					c.runQueued(w)
				default:
					return
				}
			}
		}
	}
}

func (c *Comm) runQueued(w *Work) {
	c.execMu.Lock()
	c.execute(w)
	c.execMu.Unlock()
	c.pending.Add(-1)
}

func (c *Comm) execute(w *Work) {
	defer close(w.done)
	if err := c.Err(); err != nil {
		w.err = err
		return
	}
	ctx := w.ctx
	var cancel context.CancelFunc
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	c.cancelCur.Store(&cancel)
	start := time.Now()
	c.flight.update(w, func(r *OpRecord) { r.State, r.Started = OpRunning, start })
	w.err = w.run(ctx, w)
	c.cancelCur.Store(nil)
	cancel()
	end := time.Now()
	if w.err != nil {
		if errors.Is(w.err, context.DeadlineExceeded) && !errors.Is(w.err, transport.ErrTimeout) {
			w.err = fmt.Errorf("%w: %w", transport.ErrTimeout, w.err)
		}
		if errors.Is(w.err, transport.ErrTimeout) {
			// Say who this rank was waiting for before the state is gone.
			c.log.Warn("operation timed out", "subsys", "COLL", "dump", c.DumpFlightRecord())
		}
	}
	c.flight.update(w, func(r *OpRecord) {
		r.State, r.Finished, r.Algo = OpDone, end, w.algo
		if w.err != nil {
			r.State, r.Err = OpFailed, w.err.Error()
		}
	})
	c.flight.forget(w)
	c.counters.add(w.algo, w.bytes, end.Sub(start), w.err)
	if tr := c.tracer; tr != nil {
		tr.Span(tidColl, "coll", w.desc.String(), start, end.Sub(start), map[string]any{"algo": w.algo, "bytes": w.bytes, "error": errString(w.err)})
	}
	if w.err != nil {
		w.err = c.fail(w.err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}
