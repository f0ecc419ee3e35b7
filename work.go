package goccl

import (
	"context"
	"errors"
	"fmt"

	"github.com/goccl/goccl/transport"
)

// Work is a queued operation. Wait for it before touching its buffers.
type Work struct {
	ctx  context.Context
	run  func(ctx context.Context) error
	done chan struct{}
	err  error
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
func (c *Comm) submit(ctx context.Context, run func(ctx context.Context) error) *Work {
	w := &Work{ctx: ctx, run: run, done: make(chan struct{})}
	c.mu.Lock()
	closed, err := c.closed, c.err
	c.mu.Unlock()
	if closed {
		return doneWork(fmt.Errorf("goccl: rank %d: %w: communicator closed", c.rank, transport.ErrClosed))
	}
	if err != nil {
		return doneWork(err)
	}
	select {
	case c.queue <- w:
		return w
	case <-c.quit:
		return doneWork(fmt.Errorf("goccl: rank %d: %w: communicator closed", c.rank, transport.ErrClosed))
	case <-ctx.Done():
		return doneWork(fmt.Errorf("goccl: rank %d: queueing an operation: %w", c.rank, ctxErr(ctx)))
	}
}

// loop runs queued operations one at a time until Close.
func (c *Comm) loop() {
	defer close(c.loopDone)
	for {
		select {
		case w := <-c.queue:
			c.execute(w)
		case <-c.quit:
			// Finish what was queued before Close, then stop.
			for {
				select {
				case w := <-c.queue:
					c.execute(w)
				default:
					return
				}
			}
		}
	}
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
	w.err = w.run(ctx)
	c.cancelCur.Store(nil)
	cancel()
	if w.err != nil {
		if errors.Is(w.err, context.DeadlineExceeded) && !errors.Is(w.err, transport.ErrTimeout) {
			w.err = fmt.Errorf("%w: %w", transport.ErrTimeout, w.err)
		}
		w.err = c.fail(w.err)
	}
}

func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}
