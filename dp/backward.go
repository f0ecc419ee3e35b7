package dp

import (
	"context"
	"fmt"
	"time"

	"github.com/goccl/goccl/transport"
)

// op is one collective the Engine issued, with what to do once it has finished.
type op struct {
	p      Pending
	kind   string
	unit   int
	bytes  int
	issued time.Time
	done   time.Time // set by the watcher goroutine; read after Done
	finish func() error
}

// issue records and traces a collective and starts a watcher that stamps its end, so
// that the time the communicator was busy can be told apart from the time the caller
// was blocked.
func (e *Engine) issue(kind string, unit, bytes int, start func() Pending) *op {
	o := &op{kind: kind, unit: unit, bytes: bytes, issued: time.Now()}
	e.trace(Event{Time: o.issued, What: "issue", Kind: kind, Unit: unit, Bytes: bytes})
	end := e.span(kind, unit, bytes)
	p := start()
	ch := make(chan struct{})
	go func() {
		<-p.Done()
		end()
		o.done = time.Now()
		e.trace(Event{Time: o.done, What: "done", Kind: kind, Unit: unit, Bytes: bytes})
		close(ch)
	}()
	o.p = watched{p, ch}
	e.stats.issued(bytes)
	return o
}

// Spanner is an optional Collectives ability: record a span on the rank's timeline
// (goccl's GOCCL_TRACE); it returns the function that ends the span.
type Spanner interface {
	TraceSpan(cat, name string, args map[string]any) func()
}

// span opens a timeline span for one bucket's or layer's collective, from issue to done:
// "ddp bucket 3 allreduce", "zero3 layer 2 allgather".
func (e *Engine) span(kind string, unit, bytes int) func() {
	sp, ok := e.coll.(Spanner)
	if !ok {
		return func() {}
	}
	what := "bucket"
	if e.o.Stage == 3 && kind == "allgather" {
		what = "layer"
	}
	stage := "ddp"
	if e.o.Stage > 0 {
		stage = fmt.Sprintf("zero%d", e.o.Stage)
	}
	return sp.TraceSpan("dp", fmt.Sprintf("%s %s %d %s", stage, what, unit, kind), map[string]any{"bytes": bytes})
}

// watched makes Done wait for the watcher too, so o.done is always set when seen done.
type watched struct {
	Pending
	ch chan struct{}
}

func (w watched) Done() <-chan struct{} { return w.ch }

func (w watched) Wait(ctx context.Context) error {
	err := w.Pending.Wait(ctx)
	if err == nil {
		select {
		case <-w.ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func (e *Engine) trace(ev Event) {
	if e.o.Trace != nil {
		e.traceMu.Lock()
		e.o.Trace(ev)
		e.traceMu.Unlock()
	}
}

// complete waits for o (counting the time as exposed), records its busy interval and
// runs its follow-up.
func (e *Engine) complete(ctx context.Context, o *op) error {
	t0 := time.Now()
	err := o.p.Wait(ctx)
	e.stats.blocked(time.Since(t0))
	if err != nil {
		return fmt.Errorf("dp: rank %d: %s of bucket %d (%d bytes): %w", e.rank, o.kind, o.unit, o.bytes, err)
	}
	e.stats.busy(o.issued, o.done)
	if o.finish != nil {
		return o.finish()
	}
	return nil
}

// startPass begins a backward pass on the first Grad or MarkReady call.
func (e *Engine) startPass() error {
	if e.inPass {
		return nil
	}
	e.inPass = true
	e.passSync = !e.noSync && e.micro+1 >= e.o.AccumSteps
	e.synced = false
	return nil
}

// Grad returns parameter i's gradient buffer for the current backward pass. Backward
// adds into it: it holds zeros after New and after every Step (and, under ZeRO-2 and
// 3, at the start of every micro-step, when the bucket is allocated).
func (e *Engine) Grad(i int) (transport.Buffer, error) {
	if err := e.checkParam(i, "Grad"); err != nil {
		return transport.Buffer{}, err
	}
	if err := e.startPass(); err != nil {
		return transport.Buffer{}, err
	}
	if e.ready[i] {
		return transport.Buffer{}, e.readyTwice(i, "Grad of")
	}
	ui, n := e.lay.unitOf[i], e.lay.specs[i].Len
	u := e.lay.units[ui]
	if e.o.Stage < 2 {
		return elemView(e.grads, e.pt, u.off+e.lay.offOf[i], n)
	}
	if e.bucket[ui].Len() == 0 {
		b, err := e.allocWork(e.pt, u.padded(e.world))
		if err != nil {
			return transport.Buffer{}, fmt.Errorf("dp: rank %d: gradient bucket %d: %w", e.rank, ui, err)
		}
		e.bucket[ui] = b
	}
	return elemView(e.bucket[ui], e.pt, e.lay.offOf[i], n)
}

// MarkReady says that parameter i's gradient is final for this backward pass (the
// hook PyTorch's autograd calls). When the last gradient of a bucket is ready, that
// bucket's collective is issued at once, in bucket order on every rank, and overlaps
// the rest of backward. Marking a gradient twice in one pass is an error.
func (e *Engine) MarkReady(ctx context.Context, i int) error {
	if err := e.checkParam(i, "MarkReady"); err != nil {
		return err
	}
	if err := e.startPass(); err != nil {
		return err
	}
	if e.ready[i] {
		return e.readyTwice(i, "MarkReady of")
	}
	ui := e.lay.unitOf[i]
	if e.o.Stage >= 2 && e.bucket[ui].Len() == 0 { // never asked for: a zero gradient
		if _, err := e.Grad(i); err != nil {
			return err
		}
	}
	e.ready[i] = true
	e.nReady++
	e.unitReady[ui]++
	for e.launched < len(e.lay.units) && e.unitReady[e.launched] == len(e.lay.units[e.launched].params) {
		if err := e.launch(ctx, e.launched); err != nil {
			return err
		}
		e.launched++
	}
	return e.poll()
}

// launch issues unit ui's gradient collective for this pass.
func (e *Engine) launch(ctx context.Context, ui int) error {
	u := e.lay.units[ui]
	sz := e.pt.Size()
	switch {
	case e.o.Stage >= 2: // reduce-scatter the bucket, add our slice into the shard, free it
		buf := e.bucket[ui]
		recv := mustView(buf, e.pt, e.rank*u.per, u.per)
		o := e.issue("reducescatter", ui, u.padded(e.world)*sz, func() Pending {
			return e.coll.ReduceScatter(ctx, buf, recv, u.per, e.pt, transport.Avg)
		})
		o.finish = func() error {
			err := e.dev.Cast(e.ownGrads(ui), e.pt, recv, e.pt, u.per, 1, true)
			e.freeBucket(ui)
			return err
		}
		e.inflight = append(e.inflight, o)
	case !e.passSync: // DDP and ZeRO-1 accumulate locally on no-sync micro-steps
	case e.o.Stage == 1:
		full := e.fullParamsLike(e.grads, ui)
		recv := e.ownGrads(ui)
		e.inflight = append(e.inflight, e.issue("reducescatter", ui, full.Len(), func() Pending {
			return e.coll.ReduceScatter(ctx, full, recv, u.per, e.pt, transport.Avg)
		}))
	case e.wire != e.pt: // DDP with a compression hook
		g := mustView(e.grads, e.pt, u.off, u.n)
		c, err := e.allocWork(e.wire, u.n)
		if err != nil {
			return fmt.Errorf("dp: rank %d: compression buffer for bucket %d: %w", e.rank, ui, err)
		}
		e.bucket[ui] = c
		if err := e.dev.Cast(c, e.wire, g, e.pt, u.n, 1/float32(e.world), false); err != nil {
			return fmt.Errorf("dp: rank %d: compress bucket %d: %w", e.rank, ui, err)
		}
		o := e.issue("allreduce", ui, u.n*e.wire.Size(), func() Pending {
			return e.coll.AllReduce(ctx, c, c, u.n, e.wire, transport.Sum)
		})
		o.finish = func() error {
			err := e.dev.Cast(g, e.pt, c, e.wire, u.n, 1, false)
			e.freeBucket(ui)
			return err
		}
		e.inflight = append(e.inflight, o)
	default: // DDP: average the bucket in place
		g := mustView(e.grads, e.pt, u.off, u.n)
		e.inflight = append(e.inflight, e.issue("allreduce", ui, u.n*sz, func() Pending {
			return e.coll.AllReduce(ctx, g, g, u.n, e.pt, transport.Avg)
		}))
	}
	return nil
}

// fullParamsLike is unit ui's padded range of a full buffer (gradients under ZeRO-1).
func (e *Engine) fullParamsLike(b transport.Buffer, ui int) transport.Buffer {
	u := e.lay.units[ui]
	return mustView(b, e.pt, u.off, u.padded(e.world))
}

// poll finishes collectives that are already done, in order, without blocking, so
// ZeRO-2/3 buckets are freed as early as possible.
func (e *Engine) poll() error {
	for len(e.inflight) > 0 {
		select {
		case <-e.inflight[0].p.Done():
		default:
			return nil
		}
		o := e.inflight[0]
		e.inflight = e.inflight[1:]
		if err := e.completeDone(o); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) completeDone(o *op) error {
	if err := o.p.Wait(context.Background()); err != nil { // already done: returns at once
		return fmt.Errorf("dp: rank %d: %s of bucket %d (%d bytes): %w", e.rank, o.kind, o.unit, o.bytes, err)
	}
	e.stats.busy(o.issued, o.done)
	if o.finish != nil {
		return o.finish()
	}
	return nil
}

// Wait ends the backward pass: every gradient must have been marked ready; it waits
// for the pass's collectives, after which (on a synchronising pass) the gradients are
// averaged over the world. Call it before Step, and once per micro-step.
func (e *Engine) Wait(ctx context.Context) error {
	if !e.inPass {
		return fmt.Errorf("dp: rank %d: %w: Wait without a backward pass (no gradient was marked ready since the last Wait)", e.rank, transport.ErrInvalid)
	}
	if e.nReady < len(e.ready) {
		return fmt.Errorf("dp: rank %d: %w: Wait with %d of %d gradients not marked ready (%s); every parameter must get a gradient each pass",
			e.rank, transport.ErrInvalid, len(e.ready)-e.nReady, len(e.ready), e.missing())
	}
	for len(e.inflight) > 0 {
		o := e.inflight[0]
		e.inflight = e.inflight[1:]
		if err := e.complete(ctx, o); err != nil {
			e.inflight = nil
			return err
		}
	}
	e.synced = e.passSync
	e.inPass = false
	e.micro++
	clear(e.ready)
	clear(e.unitReady)
	e.nReady, e.launched = 0, 0
	return nil
}

// readyTwice explains a second use of a gradient already marked ready: either the
// caller marked it twice, or began the next pass without Wait.
func (e *Engine) readyTwice(i int, what string) error {
	if e.nReady == len(e.ready) {
		return fmt.Errorf("dp: rank %d: %w: %s %s in a new backward pass before Wait ended the previous one (call Wait(ctx) after every backward pass)",
			e.rank, transport.ErrInvalid, what, e.paramName(i))
	}
	return fmt.Errorf("dp: rank %d: %w: gradient of %s marked ready twice in one backward pass", e.rank, transport.ErrInvalid, e.paramName(i))
}

// NoSync turns communication off for the following backward passes, which then only
// accumulate locally (PyTorch's no_sync), until the returned function is called:
//
//	restore := eng.NoSync()
//	... backward, Wait ...
//	restore()
//
// Under ZeRO-2 and 3 the gradients are still reduce-scattered (there is no full
// gradient to accumulate into); only the accounting of micro-steps changes.
func (e *Engine) NoSync() (restore func()) {
	prev := e.noSync
	e.noSync = true
	return func() { e.noSync = prev }
}

func (e *Engine) allocWork(dt transport.DType, n int) (transport.Buffer, error) {
	b, err := e.dev.Alloc(dt, n)
	if err == nil {
		e.workNow += int64(b.Len())
		e.workPeak = max(e.workPeak, e.workNow)
	}
	return b, err
}

func (e *Engine) freeWork(b *transport.Buffer) {
	if b.Len() > 0 {
		e.workNow -= int64(b.Len())
		e.dev.Free(*b)
	}
	*b = transport.Buffer{}
}

func (e *Engine) freeBucket(ui int)   { e.freeWork(&e.bucket[ui]) }
func (e *Engine) freeGathered(ui int) { e.freeWork(&e.gathered[ui]) }
