package goccl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccl/goccl/transport"
)

// Work is a queued operation. Wait for it before touching its buffers.
type Work struct {
	c   *Comm
	ctx context.Context
	opSpec
	algo  string // set by the operation when it knows
	rec   uint64 // the flight recorder's number for it
	state atomic.Uint32
	err   error

	// done is made when someone asks for it (Done, or a Wait that has to block): most
	// operations finish before anyone would, and a channel per call was a tenth of a
	// small asynchronous call's CPU time.
	doneMu sync.Mutex
	done   chan struct{}
}

// opSpec is what an operation does.
type opSpec struct {
	ext   extOp // nil for a collective or SendRecv: coll says what to run
	coll  call
	fp    transport.Fingerprint // coll's, computed once (fingerprint)
	bytes int                   // user bytes, for Stats
}

// prepare fills in what a collective's call implies: its fingerprint and its size.
func (op *opSpec) prepare() {
	if op.ext == nil {
		op.fp, op.bytes = op.coll.fingerprint(), op.coll.count*op.coll.dt.Size()
	}
}

// The states of a Work.
const (
	workQueued uint32 = iota
	workRunning
	workDone
)

// Wait blocks until the operation finished (or ctx ends) and returns its error.
//
// A waiting caller runs the queued operations itself, in issue order, up to and
// including this one, when no other goroutine is running them: handing an operation to
// the communicator's goroutine and back costs two thread wake-ups (25-50 µs in a VM),
// far more than a small collective. It does so only for operations that ctx cannot
// outlive: ones issued with ctx itself, or all of them when ctx never ends
// (context.Background). Otherwise the communicator's goroutine runs them and Wait
// returns as soon as ctx ends, leaving the operation to finish in the background.
func (w *Work) Wait(ctx context.Context) error {
	if w.finished() {
		return w.err
	}
	if w.c != nil {
		w.c.drain(w, ctx)
		if w.finished() {
			return w.err
		}
	}
	select {
	case <-w.Done():
		return w.err
	case <-ctx.Done():
		return fmt.Errorf("goccl: waiting for an operation: %w", ctxErr(ctx))
	}
}

// Done is closed when the operation has finished. Unlike Wait it does not run queued
// operations on the caller's goroutine; the communicator's own goroutine runs them.
func (w *Work) Done() <-chan struct{} {
	w.doneMu.Lock()
	defer w.doneMu.Unlock()
	if w.done == nil {
		w.done = make(chan struct{})
		if w.finished() {
			close(w.done)
		}
	}
	return w.done
}

// Err is the operation's error; valid after Done is closed.
func (w *Work) Err() error { return w.err }

func (w *Work) finished() bool { return w.state.Load() == workDone }

// finish records the outcome; err is written before the state, so a reader that sees
// workDone sees it.
func (w *Work) finish(err error) {
	w.err = err
	w.doneMu.Lock()
	w.state.Store(workDone)
	if w.done != nil {
		close(w.done)
	}
	w.doneMu.Unlock()
}

// describe names the operation for traces.
func (op *opSpec) describe() string {
	if op.ext != nil {
		return op.ext.String()
	}
	return opName(op.fp, op.coll.to, op.coll.from)
}

func doneWork(err error) *Work {
	w := &Work{}
	w.finish(err)
	return w
}

// submit queues w; it runs in issue order, on the communicator's goroutine or on the
// goroutine of a caller that waits for it (Work.Wait).
func (c *Comm) submit(w *Work) *Work {
	w.c = c
	c.lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return doneWork(fmt.Errorf("goccl: rank %d: %w: communicator closed", c.rank, transport.ErrClosed))
	case c.err != nil:
		err := c.err
		c.mu.Unlock()
		return doneWork(err)
	}
	c.flight.queued(w, &w.opSpec, monoNow(), false)
	if c.qhead > 0 && len(c.queue) == cap(c.queue) { // full: reuse what pop has freed
		n := copy(c.queue, c.queue[c.qhead:])
		clear(c.queue[n:])
		c.queue, c.qhead = c.queue[:n], 0
	}
	c.queue = append(c.queue, w)
	c.queued.Add(1)
	c.mu.Unlock()
	c.kick()
	return w
}

// kick wakes the communicator's goroutine to run what is queued (a token, not a count).
func (c *Comm) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// maxIdleQueue is the largest queue array an empty queue keeps.
const maxIdleQueue = 1024

// pop takes the oldest queued operation; the caller holds execMu, so operations leave
// the queue in the order they run. With waiter set, it takes it only if a goroutine
// waiting under that context may run it (see Work.Wait), and reports whether one was
// left for that reason.
func (c *Comm) pop(waiter context.Context) (w *Work, refused bool) {
	c.lock()
	defer c.mu.Unlock()
	if c.qhead == len(c.queue) {
		return nil, false
	}
	w = c.queue[c.qhead]
	if waiter != nil && waiter.Done() != nil && w.ctx != waiter {
		return nil, true
	}
	c.queue[c.qhead] = nil
	c.qhead++
	if c.qhead == len(c.queue) { // empty: start again at the front of the same array
		c.queue, c.qhead = c.queue[:0], 0
		if cap(c.queue) > maxIdleQueue {
			c.queue = nil // a burst's array goes
		}
	}
	c.queued.Add(-1)
	return w, false
}

// drain runs queued operations on this goroutine until until has finished (until nil:
// until the queue is empty), for a waiter whose context is waiter (nil: the
// communicator's goroutine, which runs everything). It stops at once when another
// goroutine holds execMu: that one runs the queue, and whoever releases execMu with
// operations left either goes on or kicks the communicator's goroutine, so nothing
// queued is stranded.
func (c *Comm) drain(until *Work, waiter context.Context) {
	var now int64 // when the previous operation of this drain ended (monoNow): the next one's start
	for until == nil || !until.finished() {
		if !c.execMu.TryLock() {
			return
		}
		w, refused := c.pop(waiter)
		if w != nil {
			if now == 0 {
				now = c.clockNow()
			}
			now = c.execute(w, now)
		}
		c.execMu.Unlock()
		if refused {
			break
		}
		if w == nil && c.queued.Load() == 0 {
			return
		}
	}
	if c.queued.Load() > 0 {
		c.kick() // the rest is the loop's
	}
}

// runSync runs the blocking operation op. When nothing is queued or running it runs on
// the caller's goroutine with the communicator's reusable Work and op where the caller
// has it (no allocation, no copy, no hand-off), taking mu once as it starts and once as
// it ends; otherwise it is queued behind the others and the caller runs the queue
// (Work.Wait).
func (c *Comm) runSync(ctx context.Context, op *opSpec) error {
	op.prepare()
	if c.execMu.TryLock() {
		if done, err := c.fastCall(ctx, &c.inline, op); done {
			c.execMu.Unlock()
			if c.queued.Load() > 0 {
				c.kick()
			}
			return err
		}
		now := c.clockNow() // issued and started at once
		p := c.prep(ctx, now)
		in := &c.inline
		c.lock()
		closed, err, idle := c.closed, c.err, c.qhead == len(c.queue)
		if idle && !closed && err == nil {
			in.ctx, in.algo, in.err = ctx, "", nil
			c.flight.queued(in, op, now, true)
			c.run(in, op, now, p) // releases mu
			err = in.err
			in.ctx = nil // do not keep the caller's context alive
		} else {
			c.mu.Unlock()
		}
		if closed {
			err = fmt.Errorf("goccl: rank %d: %w: communicator closed", c.rank, transport.ErrClosed)
		}
		c.execMu.Unlock()
		if c.queued.Load() > 0 {
			c.kick() // queued while this ran, by a caller that found execMu held
		}
		if idle || closed || err != nil {
			return err
		}
	}
	return c.submit(&Work{ctx: ctx, opSpec: *op}).Wait(ctx)
}

// loop runs queued operations whenever it is kicked, until Close.
func (c *Comm) loop() {
	defer close(c.loopDone)
	for {
		select {
		case <-c.wake:
			c.drain(nil, nil)
		case <-c.quit:
			// Finish what was queued before Close (waiting for a caller that is running
			// some of it), then stop.
			for {
				c.execMu.Lock()
				w, _ := c.pop(nil)
				if w != nil {
					c.execute(w, c.clockNow())
				}
				c.execMu.Unlock()
				if w == nil {
					return
				}
			}
		}
	}
}

// execute runs the queued Work w, which starts at start (monoNow), and returns when it
// ended; the caller holds execMu.
func (c *Comm) execute(w *Work, start int64) int64 {
	w.state.Store(workRunning)
	if done, _ := c.fastCall(w.ctx, w, &w.opSpec); done { // w has its error
		return c.fast.clock.last
	}
	p := c.prep(w.ctx, start)
	c.lock()
	if err := c.err; err != nil { // not run, and not counted in Stats
		c.flight.end(w.rec, start, "", err)
		c.mu.Unlock()
		w.finish(err)
		return start
	}
	c.flight.started(w.rec, start)
	return c.run(w, &w.opSpec, start, p)
}

// run runs op as w, recorded as started at start, and returns when it ended. The caller
// holds execMu, and mu, which run releases once the operation's start is recorded: the
// inline Work of runSync, or a queued one (execute, op is w's own).
func (c *Comm) run(w *Work, op *opSpec, start int64, p opPrep) int64 {
	var hdr transport.Header
	coll := op.ext == nil && op.coll.kind != KindSendRecv // takes the next collective header
	if coll {
		hdr = transport.Header{Seq: c.seq + 1, Fp: op.fp}
	}
	if !p.cancelled {
		if coll {
			c.opStartLocked(w.ctx, start, p.dl, &hdr)
		} else {
			c.opStartLocked(w.ctx, start, p.dl, nil)
		}
	}
	c.mu.Unlock()
	c.opSince = start
	var err error
	if p.cancelled {
		// The caller gave up before it started; the other ranks will not, so the
		// communicator fails as if it had been cancelled mid-way, and tells its peers
		// so (failOp): they would otherwise wait in this operation for the timeout.
		err = fmt.Errorf("goccl: rank %d: operation cancelled before it started: %w", c.rank, ctxErr(w.ctx))
		if coll {
			err = c.failOp(w.ctx, hdr, err)
		} else {
			err = c.failOp(w.ctx, transport.Header{Seq: c.seq, Fp: op.fp}, err)
		}
	} else {
		c.arm(w.ctx)
		switch k := &op.coll; {
		case op.ext != nil:
			err = c.runExt(&c.op, w, op.ext)
		case !coll:
			w.algo = "p2p"
			if err = c.runP2P(&c.op, op); err != nil {
				// As a collective's: the ranks agree on the root cause, and every peer
				// hears of the failure (failure.go).
				err = c.failOp(&c.op, transport.Header{Seq: c.seq, Fp: op.fp}, err)
			}
		default:
			c.seq = hdr.Seq
			err = c.runCollective(&c.op, w, k, hdr)
		}
	}
	return c.finish(w, op, start, p, err)
}

// finish ends op, run as w since start, with err: the flight record, Stats, the
// sticky error, the operation context, and w's result. It returns when the operation
// ended (monoNow). The caller holds execMu.
func (c *Comm) finish(w *Work, op *opSpec, start int64, p opPrep, err error) int64 {
	end := c.clockNow()
	took := time.Duration(end - start)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, transport.ErrTimeout) {
			err = fmt.Errorf("%w: %w", transport.ErrTimeout, err)
		}
		if errors.Is(err, transport.ErrTimeout) {
			// Say who this rank was waiting for before the state is gone.
			c.log.Warn("operation timed out", "subsys", "COLL", "dump", c.DumpFlightRecord())
		}
	}
	c.lock()
	refresh := !p.cancelled && c.opEndLocked(err == nil)
	c.flight.end(w.rec, end, w.algo, err)
	c.counters.add(w.algo, op.bytes, took, err)
	if err != nil { // the first error sticks (fail)
		if c.err == nil {
			c.err = err
			c.unusable.Store(true)
		}
		err = c.err
	}
	c.mu.Unlock()
	if refresh {
		c.initOpCtx()
	}
	if tr := c.tracer; tr != nil {
		tr.Span(tidColl, "coll", op.describe(), monoTime(start), took, map[string]any{"algo": w.algo, "bytes": op.bytes, "error": errString(err)})
	}
	if w == &c.inline { // runSync reads its err; nobody else sees that Work
		w.err = err
	} else {
		w.finish(err)
	}
	return end
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
