package goccl

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/goccl/goccl/internal/relstore"
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
	deadline int64 // relstore, atomic loads: the running operation's deadline, unix nanoseconds; 0 when none runs
}

// Deadline is the running operation's: its start plus Config.Timeout, or its caller's
// deadline when that is earlier.
func (o *opCtx) Deadline() (time.Time, bool) {
	d := atomic.LoadInt64(&o.deadline)
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
	c.lock()
	c.op.Context, c.opCancel = base, cancel
	c.mu.Unlock()
}

// opPrep is what an operation's start needs from its caller's context, computed before
// the communicator's lock is taken: the context's methods are the caller's code, which
// must not run under that lock.
type opPrep struct {
	dl        int64 // the deadline: the start plus Config.Timeout, or the caller's when earlier (Unix ns)
	cancelled bool  // the caller's context had ended before the operation started
}

func (c *Comm) prep(user context.Context, start int64) opPrep {
	dl := monoUnix(start) + int64(c.cfg.Timeout)
	if dl < 0 { // a timeout of centuries: no deadline to speak of
		dl = math.MaxInt64
	}
	if d, ok := user.Deadline(); ok && d.UnixNano() < dl {
		dl = d.UnixNano()
	}
	return opPrep{dl: dl, cancelled: user.Err() != nil}
}

// opStartLocked arms the operation context for an operation that starts at start on
// behalf of a caller whose context is user, with deadline dl, and records a collective's
// header (nil for other operations) as the watchdog's progress. The caller holds
// execMu and mu, and calls arm(user) once it has released mu.
func (c *Comm) opStartLocked(user context.Context, start, dl int64, coll *transport.Header) {
	c.opGen++
	c.opRunning, c.opStarted, c.opUser = true, start, user
	if coll != nil {
		c.prog = progressRec{seq: coll.Seq, fp: coll.Fp, gen: c.opGen}
	}
	relstore.Int64(&c.op.deadline, dl)
}

// arm makes the end of user cancel the operation running on its behalf. One callback
// per caller context, not per operation: a caller that issues its operations under one
// context (a training loop's, perf's) arms it once. Registering on a cancelable
// context costs a lock, an allocation and a map insert in its parent, a quarter of a
// small collective's CPU time. The caller holds execMu.
func (c *Comm) arm(user context.Context) {
	if user.Done() != nil && user != c.opArmed {
		c.disarm()
		c.opArmed = user
		c.opStop = context.AfterFunc(user, func() { c.cancelFor(user) })
	}
}

// disarm removes the callback on the last caller context; the caller holds execMu (or
// the communicator is closed and nothing runs).
func (c *Comm) disarm() {
	if c.opStop != nil {
		c.opStop()
		c.opStop, c.opArmed = nil, nil
	}
}

// opEndLocked ends the operation opStartLocked began (the callback on its caller's
// context stays armed for the next operation under the same context); the caller holds
// mu. It reports whether the communicator needs a fresh operation context: when a
// deadline or the caller's context cancelled the operation but it succeeded all the
// same (the cancellation came after its last message), the links are intact, and the
// next operation must not inherit the cancellation (initOpCtx, once mu is released).
func (c *Comm) opEndLocked(ok bool) (refresh bool) {
	c.opRunning, c.opUser = false, nil
	relstore.Int64(&c.op.deadline, 0)
	return ok && c.err == nil && c.op.Context.Err() != nil
}

// cancelRunning cancels operation gen with cause if it is still running: a check that
// finishes late must not cancel the next operation.
func (c *Comm) cancelRunning(gen uint64, cause error) {
	c.lock()
	if c.opRunning && c.opGen == gen {
		c.opCancel(cause)
	}
	c.mu.Unlock()
}

// cancelFor cancels the running operation if it runs on behalf of the caller context
// user, which has just ended; an operation of another caller is left alone (and one
// that starts later under user fails before it sends anything, see execute).
func (c *Comm) cancelFor(user context.Context) {
	c.lock()
	if c.opRunning && c.opUser == user {
		c.opCancel(user.Err())
	}
	c.mu.Unlock()
}

// cancelOp cancels the running operation, if any, and every later one (Abort, Close).
func (c *Comm) cancelOp(cause error) {
	c.lock()
	c.opCancel(cause)
	c.mu.Unlock()
}

// checkDeadline cancels the running operation if it is past its deadline; the watchdog
// calls it.
func (c *Comm) checkDeadline(now time.Time) {
	c.lock()
	if d := atomic.LoadInt64(&c.op.deadline); c.opRunning && d != 0 && now.UnixNano() > d {
		c.opCancel(context.DeadlineExceeded)
	}
	c.mu.Unlock()
}

// deadlinePeriod is how often the watchdog checks the running operation's deadline: a
// sixteenth of the timeout (so it fires within about 6% of it), between 1 ms and
// watchPeriod.
func deadlinePeriod(timeout time.Duration) time.Duration {
	return min(max(timeout/16, time.Millisecond), watchPeriod)
}
