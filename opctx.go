package goccl

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/goccl/goccl/transport"
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
// caller whose context is user, and records a collective's header (nil for other
// operations) as the watchdog's progress. The caller holds execMu.
func (c *Comm) opStart(user context.Context, start int64, coll *transport.Header) context.Context {
	dl := monoUnix(start) + int64(c.cfg.Timeout)
	if dl < 0 { // a timeout of centuries: no deadline to speak of
		dl = math.MaxInt64
	}
	if d, ok := user.Deadline(); ok && d.UnixNano() < dl {
		dl = d.UnixNano()
	}
	c.opMu.Lock()
	c.opGen++
	c.opRunning, c.opStarted, c.opUser = true, start, user
	if coll != nil {
		c.prog = progressRec{seq: coll.Seq, fp: coll.Fp, gen: c.opGen}
	}
	c.op.deadline.Store(dl)
	c.opMu.Unlock()
	if user.Done() != nil && user != c.opArmed {
		// One callback per caller context, not per operation: a caller that issues its
		// operations under one context (a training loop's, perf's) arms it once.
		// Registering on a cancelable context costs a lock, an allocation and a map
		// insert in its parent, a quarter of a small collective's CPU time.
		c.disarm()
		c.opArmed = user
		c.opStop = context.AfterFunc(user, func() { c.cancelFor(user) })
	}
	return &c.op
}

// disarm removes the callback on the last caller context; the caller holds execMu (or
// the communicator is closed and nothing runs).
func (c *Comm) disarm() {
	if c.opStop != nil {
		c.opStop()
		c.opStop, c.opArmed = nil, nil
	}
}

// opEnd ends the operation opStart began (the callback on its caller's context stays
// armed for the next operation under the same context). When a deadline or the caller's context cancelled
// the operation but it succeeded all the same (the cancellation came after its last
// message), the links are intact and the communicator gets a fresh context, so the next
// operation does not inherit the cancellation.
func (c *Comm) opEnd(ok bool) {
	c.opMu.Lock()
	c.opRunning, c.opUser = false, nil
	c.op.deadline.Store(0)
	cancelled := c.op.Context.Err() != nil
	c.opMu.Unlock()
	if ok && cancelled && c.Err() == nil {
		c.initOpCtx()
	}
}

// cancelRunning cancels operation gen with cause if it is still running: a check that
// finishes late must not cancel the next operation.
func (c *Comm) cancelRunning(gen uint64, cause error) {
	c.opMu.Lock()
	if c.opRunning && c.opGen == gen {
		c.opCancel(cause)
	}
	c.opMu.Unlock()
}

// cancelFor cancels the running operation if it runs on behalf of the caller context
// user, which has just ended; an operation of another caller is left alone (and one
// that starts later under user fails before it sends anything, see execute).
func (c *Comm) cancelFor(user context.Context) {
	c.opMu.Lock()
	if c.opRunning && c.opUser == user {
		c.opCancel(user.Err())
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
