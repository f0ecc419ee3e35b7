package dp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/goccl/goccl/transport"
)

// Default bucket caps, PyTorch DDP's: a small first bucket so that the last layers'
// gradients start communicating early, then 25 MiB.
const (
	DefaultFirstBucketBytes = 1 << 20
	DefaultBucketBytes      = 25 << 20
)

// Options configures an Engine. The zero value is DDP in float32 with PyTorch's
// bucket sizes and AdamW defaults on the host.
type Options struct {
	// Stage is 0 (DDP: replicate everything, all-reduce gradients), 1 (shard the
	// optimizer state), 2 (also the gradients) or 3 (also the parameters).
	Stage int
	// Precision of the working parameters and gradients: "fp32" (default), "bf16" or
	// "fp16". With 16-bit working types the optimizer keeps fp32 master weights; fp16
	// also gets dynamic loss scaling (see LossScale).
	Precision string
	// FirstBucketBytes and BucketBytes cap the gradient buckets (0: the defaults).
	// ZeRO-3 communicates per layer instead.
	FirstBucketBytes, BucketBytes int
	// AccumSteps is the number of backward passes per optimizer step (0 or 1: no
	// accumulation). DDP and ZeRO-1 communicate only on the last one; ZeRO-2 and 3
	// reduce-scatter every micro-step into the gradient shard (they hold no full
	// gradient to accumulate into), as DeepSpeed does.
	AccumSteps int
	// Compress puts DDP's float32 gradients on the wire as "bf16" or "fp16" (PyTorch's
	// bf16/fp16_compress_hook: scale by 1/W, cast, all-reduce, cast back). "" = off.
	Compress string
	// AdamW is the optimizer (nil: DefaultAdamW).
	AdamW *AdamW
	// LossScale is fp16's initial dynamic loss scale (0: 65536); it halves on overflow
	// and doubles after LossScaleWindow (0: 2000) clean steps.
	LossScale       float32
	LossScaleWindow int
	// Device holds the buffers (nil: a new Host).
	Device Device
	// SharedMemory puts the full gradient and parameter buffers (DDP's and ZeRO-1's
	// gradients, the parameters up to ZeRO-2) in memory from the communicator's
	// AllocShared, so that their collectives read each other's buffers in place when
	// every link is shm (goccl's direct algorithm; over other transports the memory is
	// ordinary and nothing changes). New and Close are then collective: every rank calls
	// them, in the same order. It needs the host device and a communicator that can
	// allocate shared memory (New's, or Collectives with AllocShared and FreeShared).
	SharedMemory bool
	// Trace, when set, is called for every gradient or parameter collective the
	// Engine issues and completes (from other goroutines too: keep it cheap and safe).
	Trace func(Event)
}

// Event is one traced collective.
type Event struct {
	Time  time.Time
	What  string // "issue" or "done"
	Kind  string // "allreduce", "reducescatter", "allgather"
	Unit  int    // the bucket (or ZeRO-3 layer unit) index
	Bytes int
}

// Engine is one rank's data-parallel state: flat parameter, gradient, master-weight and
// moment buffers laid out in units, the collectives in flight, and the optimizer. Its
// methods are called from one goroutine (the training loop); the collectives run
// behind it on the communicator.
type Engine struct {
	coll        Collectives
	dev         Device
	o           Options
	hp          AdamW
	rank, world int
	lay         *layout
	pt          transport.DType // working parameter and gradient type
	wire        transport.DType // DDP gradient wire type (pt unless compressed)
	aliased     bool            // float32: the working parameters are the master weights

	params, grads, master, m, v transport.Buffer
	shared                      []transport.Buffer // from SharedAllocator.AllocShared: Close frees them

	// transient, per unit
	bucket   []transport.Buffer // ZeRO-2/3 gradient buckets, DDP compression buffers
	gathered []transport.Buffer // ZeRO-3 gathered layer parameters
	gather   []*op              // ZeRO-3 gathers in flight

	// the current backward pass
	ready     []bool
	unitReady []int
	nReady    int
	launched  int
	inPass    bool
	passSync  bool
	inflight  []*op

	micro      int  // backward passes since the last Step
	synced     bool // the last pass communicated and was waited for
	steps      int
	lossScale  float32
	goodSteps  int
	skipped    int
	workNow    int64
	workPeak   int64
	stats      stepClock
	last       StepStats
	traceMu    sync.Mutex
	noSync     bool
	paramBytes int
}

// NewOn builds the Engine for this rank: it checks that every rank registered the same
// parameters with the same options (an error naming the first difference otherwise),
// allocates the buffers for the stage, and broadcasts rank 0's initial values. Every
// rank calls it with the same arguments.
func NewOn(ctx context.Context, coll Collectives, params []Spec, o Options) (*Engine, error) {
	e := &Engine{coll: coll, rank: coll.Rank(), world: coll.Size()}
	if err := e.configure(params, o); err != nil {
		return nil, err
	}
	if err := e.checkRanks(ctx, params); err != nil {
		return nil, err
	}
	if err := e.allocate(ctx); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.broadcastInit(ctx, params); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Engine) configure(params []Spec, o Options) error {
	if o.Stage < 0 || o.Stage > 3 {
		return fmt.Errorf("dp: %w: ZeRO stage %d (valid: 0 = DDP, 1, 2, 3)", transport.ErrInvalid, o.Stage)
	}
	var err error
	if e.pt, err = parsePrecision(o.Precision); err != nil {
		return err
	}
	e.wire = e.pt
	if o.Compress != "" {
		c, err := parsePrecision(o.Compress)
		if err != nil || c == transport.Float32 {
			return fmt.Errorf("dp: %w: gradient compression %q (valid: bf16, fp16, or empty for none)", transport.ErrInvalid, o.Compress)
		}
		if o.Stage != 0 || e.pt != transport.Float32 {
			return fmt.Errorf("dp: %w: gradient compression %q needs stage 0 with fp32 gradients (got stage %d, %s)", transport.ErrInvalid, o.Compress, o.Stage, e.pt)
		}
		e.wire = c
	}
	if o.FirstBucketBytes < 0 || o.BucketBytes < 0 {
		return fmt.Errorf("dp: %w: bucket caps %d and %d bytes (want >= 0; 0 = default)", transport.ErrInvalid, o.FirstBucketBytes, o.BucketBytes)
	}
	if o.FirstBucketBytes == 0 {
		o.FirstBucketBytes = DefaultFirstBucketBytes
	}
	if o.BucketBytes == 0 {
		o.BucketBytes = DefaultBucketBytes
	}
	if o.AccumSteps < 0 {
		return fmt.Errorf("dp: %w: %d accumulation steps (want >= 1)", transport.ErrInvalid, o.AccumSteps)
	}
	if o.AccumSteps == 0 {
		o.AccumSteps = 1
	}
	e.hp = DefaultAdamW()
	if o.AdamW != nil {
		e.hp = *o.AdamW
	}
	if err := e.hp.Validate(); err != nil {
		return fmt.Errorf("dp: %w: %w", transport.ErrInvalid, err)
	}
	e.lossScale = 1
	if e.pt == transport.Float16 {
		e.lossScale = o.LossScale
		if e.lossScale == 0 {
			e.lossScale = 65536
		}
		if !(e.lossScale > 0) {
			return fmt.Errorf("dp: %w: loss scale %v (want > 0)", transport.ErrInvalid, o.LossScale)
		}
		if o.LossScaleWindow <= 0 {
			o.LossScaleWindow = 2000
		}
	}
	if o.Device == nil {
		o.Device = NewHost()
	}
	if e.world < 1 || e.rank < 0 || e.rank >= e.world {
		return fmt.Errorf("dp: %w: rank %d of %d", transport.ErrInvalid, e.rank, e.world)
	}
	if err := validateSpecs(params); err != nil {
		return err
	}
	e.o, e.dev = o, o.Device
	e.aliased = e.pt == transport.Float32
	e.lay = buildLayout(params, e.pt.Size(), o.FirstBucketBytes, o.BucketBytes, o.Stage == 3, o.Stage > 0, e.world)
	nu := len(e.lay.units)
	e.bucket, e.gathered, e.gather = make([]transport.Buffer, nu), make([]transport.Buffer, nu), make([]*op, nu)
	e.ready, e.unitReady = make([]bool, len(params)), make([]int, nu)
	return nil
}

func parsePrecision(s string) (transport.DType, error) {
	if s == "" {
		return transport.Float32, nil
	}
	dt, err := transport.ParseDType(s)
	if err == nil && workingType(dt) == nil {
		return dt, nil
	}
	return 0, fmt.Errorf("dp: %w: precision %q (valid: fp32, bf16, fp16)", transport.ErrInvalid, s)
}

// allocate makes the persistent buffers for the stage: full or shard, per the seeds'
// table (DDP keeps everything, ZeRO-1 shards master and moments, ZeRO-2 also the
// gradients, ZeRO-3 also the parameters).
func (e *Engine) allocate(ctx context.Context) error {
	l, st := e.lay, e.o.Stage
	sa, _ := e.coll.(SharedAllocator)
	if e.o.SharedMemory {
		if _, host := e.dev.(*Host); !host || sa == nil {
			return fmt.Errorf("dp: rank %d: %w: SharedMemory needs the host device (have %s) and a communicator with AllocShared (dp.New's)",
				e.rank, transport.ErrInvalid, e.dev)
		}
	}
	pn, gn, on := l.full, l.full, l.full
	if st >= 1 {
		on = l.shard
	}
	if st >= 2 {
		gn = l.shard
	}
	if st >= 3 {
		pn = l.shard
	}
	var err error
	alloc := func(b *transport.Buffer, dt transport.DType, n int, what string, full bool) {
		switch {
		case err != nil:
		case full && e.o.SharedMemory && n > 0:
			// Collective, and first: every rank reaches these calls alike.
			var mem []byte
			if mem, err = sa.AllocShared(ctx, n*dt.Size()); err != nil {
				err = fmt.Errorf("dp: rank %d: allocate %s (%d x %s) in shared memory: %w", e.rank, what, n, dt, err)
				return
			}
			*b = transport.HostBuffer(mem)
			e.shared = append(e.shared, *b)
		default:
			if *b, err = e.dev.Alloc(dt, n); err != nil {
				err = fmt.Errorf("dp: rank %d: allocate %s (%d x %s) on %s: %w", e.rank, what, n, dt, e.dev, err)
			}
		}
	}
	alloc(&e.params, e.pt, pn, "parameters", st < 3)
	alloc(&e.grads, e.pt, gn, "gradients", st < 2)
	if !e.aliased {
		alloc(&e.master, transport.Float32, on, "master weights", false)
	}
	alloc(&e.m, transport.Float32, on, "first moments", false)
	alloc(&e.v, transport.Float32, on, "second moments", false)
	return err
}

// Close frees the Engine's buffers. The Engine must not be used afterwards.
func (e *Engine) Close() error {
	isShared := func(b transport.Buffer) bool {
		for _, s := range e.shared {
			if transport.Same(s, b) {
				return true
			}
		}
		return false
	}
	for _, b := range []*transport.Buffer{&e.params, &e.grads, &e.master, &e.m, &e.v} {
		if b.Len() > 0 && !isShared(*b) {
			e.dev.Free(*b)
		}
		*b = transport.Buffer{}
	}
	for u := range e.lay.units {
		e.freeBucket(u)
		e.freeGathered(u)
	}
	var errs []error
	if sa, ok := e.coll.(SharedAllocator); ok {
		for _, b := range e.shared {
			if err := sa.FreeShared(context.Background(), b.Bytes()); err != nil {
				errs = append(errs, fmt.Errorf("dp: rank %d: free shared memory: %w", e.rank, err))
			}
		}
	}
	e.shared = nil
	return errors.Join(errs...)
}

// broadcastInit assembles rank 0's initial values in fp32, broadcasts them, and keeps
// what this rank holds: everything (DDP), or its shard of the master weights. The fp32
// staging buffer (4 bytes per padded parameter) lives only during New.
func (e *Engine) broadcastInit(ctx context.Context, params []Spec) error {
	l := e.lay
	host := make([]float32, l.full)
	if e.rank == 0 {
		for i, s := range params {
			if s.Init != nil {
				copy(host[e.paramOffset(i):], s.Init)
			}
		}
	}
	stage, err := e.dev.Alloc(transport.Float32, l.full)
	if err != nil {
		return fmt.Errorf("dp: rank %d: allocate the initial-value buffer: %w", e.rank, err)
	}
	defer e.dev.Free(stage)
	if err := e.dev.Upload(ctx, stage, asBytes(host)); err != nil {
		return fmt.Errorf("dp: rank %d: upload initial values: %w", e.rank, err)
	}
	if e.world > 1 {
		if err := e.coll.Broadcast(ctx, stage, stage, l.full, transport.Float32, 0).Wait(ctx); err != nil {
			return fmt.Errorf("dp: rank %d: broadcast initial parameters from rank 0: %w", e.rank, err)
		}
	}
	for ui, u := range l.units {
		n := u.n
		if e.o.Stage > 0 {
			n = u.padded(e.world)
		}
		src := mustView(stage, transport.Float32, u.off, n)
		if e.o.Stage < 3 {
			if err := e.dev.Cast(e.fullParams(ui), e.pt, src, transport.Float32, src.Len()/4, 1, false); err != nil {
				return fmt.Errorf("dp: rank %d: set initial parameters: %w", e.rank, err)
			}
		}
		own := mustView(stage, transport.Float32, u.off+e.ownOffset(u), u.per)
		if e.o.Stage == 3 {
			if err := e.dev.Cast(e.ownParams(ui), e.pt, own, transport.Float32, u.per, 1, false); err != nil {
				return fmt.Errorf("dp: rank %d: set initial parameter shard: %w", e.rank, err)
			}
		}
		if !e.aliased {
			if err := e.dev.Cast(e.ownMaster(ui), transport.Float32, own, transport.Float32, u.per, 1, false); err != nil {
				return fmt.Errorf("dp: rank %d: set initial master weights: %w", e.rank, err)
			}
		}
	}
	return nil
}

// paramOffset is parameter i's offset in the full flat layout.
func (e *Engine) paramOffset(i int) int { return e.lay.units[e.lay.unitOf[i]].off + e.lay.offOf[i] }

// ownOffset is where this rank's slice starts inside a unit (0 for DDP, which owns all).
func (e *Engine) ownOffset(u *unit) int {
	if e.o.Stage == 0 {
		return 0
	}
	return e.rank * u.per
}

// fullParams is unit ui's full parameters (stages 0-2).
func (e *Engine) fullParams(ui int) transport.Buffer {
	u := e.lay.units[ui]
	n := u.n
	if e.o.Stage > 0 {
		n = u.padded(e.world)
	}
	return mustView(e.params, e.pt, u.off, n)
}

// ownParams is this rank's slice of unit ui's working parameters.
func (e *Engine) ownParams(ui int) transport.Buffer {
	u := e.lay.units[ui]
	if e.o.Stage == 3 {
		return mustView(e.params, e.pt, u.soff, u.per)
	}
	return mustView(e.params, e.pt, u.off+e.ownOffset(u), u.per)
}

// ownMaster is this rank's fp32 master weights for unit ui (the working parameters
// themselves when those are fp32).
func (e *Engine) ownMaster(ui int) transport.Buffer {
	if e.aliased {
		return e.ownParams(ui)
	}
	u := e.lay.units[ui]
	if e.o.Stage == 0 {
		return mustView(e.master, transport.Float32, u.off, u.n)
	}
	return mustView(e.master, transport.Float32, u.soff, u.per)
}

// ownMoments returns this rank's m and v for unit ui.
func (e *Engine) ownMoments(ui int) (m, v transport.Buffer) {
	u := e.lay.units[ui]
	off := u.soff
	if e.o.Stage == 0 {
		off = u.off
	}
	return mustView(e.m, transport.Float32, off, u.per), mustView(e.v, transport.Float32, off, u.per)
}

// ownGrads is this rank's reduced gradients for unit ui after Wait.
func (e *Engine) ownGrads(ui int) transport.Buffer {
	u := e.lay.units[ui]
	if e.o.Stage >= 2 {
		return mustView(e.grads, e.pt, u.soff, u.per)
	}
	return mustView(e.grads, e.pt, u.off+e.ownOffset(u), u.per)
}

// Rank is this rank in the data-parallel group.
func (e *Engine) Rank() int { return e.rank }

// World is the data-parallel world size.
func (e *Engine) World() int { return e.world }

// Stage is the ZeRO stage (0 = DDP).
func (e *Engine) Stage() int { return e.o.Stage }

// DType is the working parameter and gradient type.
func (e *Engine) DType() transport.DType { return e.pt }

// Device is where the buffers live.
func (e *Engine) Device() Device { return e.dev }

// NumParams is the number of registered tensors.
func (e *Engine) NumParams() int { return len(e.lay.specs) }

// Spec returns tensor i's registration (without its initial values).
func (e *Engine) Spec(i int) Spec { s := e.lay.specs[i]; s.Init = nil; return s }

// NumLayers is the number of layers the tensors were registered in.
func (e *Engine) NumLayers() int { return len(e.lay.layers) }

// LossScale is the factor to multiply the loss by before backward: the dynamic fp16
// loss scale, or 1 for other types.
func (e *Engine) LossScale() float32 { return e.lossScale }

// Steps is the number of optimizer updates applied (skipped fp16 steps not counted).
func (e *Engine) Steps() int { return e.steps }

// SkippedSteps is the number of fp16 steps skipped because of overflow.
func (e *Engine) SkippedSteps() int { return e.skipped }

// AccumSteps is the number of backward passes per optimizer step.
func (e *Engine) AccumSteps() int { return e.o.AccumSteps }

func (e *Engine) paramName(i int) string {
	return fmt.Sprintf("%q (parameter %d)", e.lay.specs[i].Name, i)
}

// Buckets describes the communication units, in the order they are issued.
func (e *Engine) Buckets() string { return e.lay.describe(e.pt.Size()) }

// NumBuckets is the number of communication units.
func (e *Engine) NumBuckets() int { return len(e.lay.units) }

func (e *Engine) checkParam(i int, what string) error {
	if i < 0 || i >= len(e.lay.specs) {
		return fmt.Errorf("dp: %w: %s: parameter index %d (valid: 0..%d)", transport.ErrInvalid, what, i, len(e.lay.specs)-1)
	}
	return nil
}

func (e *Engine) missing() string {
	var names []string
	for i, r := range e.ready {
		if !r {
			names = append(names, e.lay.specs[i].Name)
			if len(names) == 5 {
				names = append(names, "...")
				break
			}
		}
	}
	return strings.Join(names, ", ")
}
