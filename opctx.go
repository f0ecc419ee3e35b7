package goccl

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// opCtx is the context every operation of a communicator runs under. There is one per
// communicator, cancelled for good (with a cause) when an operation passes its deadline,
// when its caller's context ends while it runs, or on Abort: each of those leaves the
// communicator unusable anyway, so nothing is lost by not deriving a fresh context per
// call, and a small collective saves the allocation and the runtime timer of
// context.WithTimeout. The watchdog enforces the deadline (watchdog.go).
type opCtx struct {
	// A cancelCtx: contexts derived from it and context.AfterFunc (the transports arm
	// one per blocking call) register on it without a goroutine.
	context.Context
	deadline atomic.Int64 // the running operation's deadline, unix nanoseconds; 0 when none runs
}

// Deadline is the running operation's: its start plus Config.Timeout, or its caller's
// deadline when that is earlier.
func (o *opCtx) Deadline() (time.Time, bool) {
	d := o.deadline.Load()
	if d == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, d), true
}

// Err is context.DeadlineExceeded when the operation (or its caller's context) ran out of
// time, context.Canceled when it was cancelled or the communicator aborted.
func (o *opCtx) Err() error {
	if o.Context.Err() == nil {
		return nil
	}
	if errors.Is(context.Cause(o.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return context.Canceled
}

// initOpCtx gives the communicator a fresh operation context.
func (c *Comm) initOpCtx() {
	base, cancel := context.WithCancelCause(context.Background())
	c.opMu.Lock()
	c.op.Context, c.opCancel = base, cancel
	c.opMu.Unlock()
}

// opStart arms the operation context for an operation that starts now on behalf of a
// caller whose context is user. The caller holds execMu.
func (c *Comm) opStart(user context.Context, start time.Time) context.Context {
	dl := start.Add(c.cfg.Timeout).UnixNano()
	if d, ok := user.Deadline(); ok && d.UnixNano() < dl {
		dl = d.UnixNano()
	}
	c.opMu.Lock()
	c.opGen++
	gen := c.opGen
	c.opRunning, c.opStarted = true, start
	c.op.deadline.Store(dl)
	c.opMu.Unlock()
	if user.Done() != nil {
		c.opStop = context.AfterFunc(user, func() { c.cancelRunning(gen, user.Err()) })
	}
	return &c.op
}

// opEnd disarms what opStart armed. When a deadline or the caller's context cancelled
// the operation but it succeeded all the same (the cancellation came after its last
// message), the links are intact and the communicator gets a fresh context, so the next
// operation does not inherit the cancellation.
func (c *Comm) opEnd(ok bool) {
	if c.opStop != nil {
		c.opStop()
		c.opStop = nil
	}
	c.opMu.Lock()
	c.opRunning = false
	c.op.deadline.Store(0)
	cancelled := c.op.Context.Err() != nil
	c.opMu.Unlock()
	if ok && cancelled && c.Err() == nil {
		c.initOpCtx()
	}
}

// cancelRunning cancels operation gen with cause if it is still running: a callback
// that fires late must not cancel the next operation.
func (c *Comm) cancelRunning(gen uint64, cause error) {
	c.opMu.Lock()
	if c.opRunning && c.opGen == gen {
		c.opCancel(cause)
	}
	c.opMu.Unlock()
}

// cancelOp cancels the running operation, if any, and every later one (Abort, Close).
func (c *Comm) cancelOp(cause error) {
	c.opMu.Lock()
	c.opCancel(cause)
	c.opMu.Unlock()
}

// checkDeadline cancels the running operation if it is past its deadline; the watchdog
// calls it.
func (c *Comm) checkDeadline(now time.Time) {
	c.opMu.Lock()
	if d := c.op.deadline.Load(); c.opRunning && d != 0 && now.UnixNano() > d {
		c.opCancel(context.DeadlineExceeded)
	}
	c.opMu.Unlock()
}

// deadlinePeriod is how often the watchdog checks the running operation's deadline: a
// sixteenth of the timeout (so it fires within about 6% of it), between 1 ms and
// watchPeriod.
func deadlinePeriod(timeout time.Duration) time.Duration {
	return min(max(timeout/16, time.Millisecond), watchPeriod)
}
