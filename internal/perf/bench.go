package perf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/direct"
	"github.com/goccl/goccl/transport"
)

// testFault is the in-process form of the FaultEnv hook, for tests.
var testFault bool

// errTestTimeout marks a test that ran past -T.
var errTestTimeout = errors.New("test timeout")

// bench is one rank's state for one report: the buffers (allocated once for the
// largest size, like nccl-tests), the seed counter every rank advances in step, and
// the running totals for the footer.
type bench struct {
	comm     *goccl.Comm
	o        *Options
	n, rank  int
	sizes    []int64
	roots    []int
	rep      *Report // rank 0 only
	sendBuf  transport.Buffer
	recvBuf  transport.Buffer
	device   bool
	frees    []func()
	seed     uint64
	errors   int // test points where this rank saw wrong data
	bwSum    float64
	bwCount  int
	points   []Point
	collect  bool // gather plot points (first dtype/op/root only)
	fault    bool
	faultAt  int // the rank that corrupts its result under the fault hook
	stageBuf []byte
	inter    *interleaver    // --interleave's measuring pass: the algorithms take turns
	replay   *replay         // a report of points --interleave measured: printed, not timed
	model    algos.CostModel // --predict: the communicator's cost model (CommModel)
	shared   bool            // -R 2 and the ranks share the buffers: large calls run direct
}

// hostBuffers are one rank's host buffers, allocated by its first report and reused by
// the next ones (as nccl-tests allocates once), so every report of a run of several
// transports and algorithms times the same memory.
type hostBuffers struct{ send, recv []byte }

// hostBuffer returns n bytes with every page written. Memory the kernel has only
// promised reads as its shared zero page, one physical page in cache for every virtual
// one, so an out-of-place collective timed on a send buffer nobody wrote would measure
// its reads at cache speed (the first report of a process measured 30-40 % more busbw
// at 64 MiB than the same algorithm after it). Device memory has no such pages, and the
// peers' benchmarks write their buffers before timing. One byte per page is enough.
func hostBuffer(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += os.Getpagesize() {
		b[i] = 1
	}
	return b
}

func newBench(ctx context.Context, comm *goccl.Comm, o *Options, hb *hostBuffers) (*bench, error) {
	b := &bench{comm: comm, o: o, n: comm.Size(), rank: comm.Rank(), device: o.Device == "cuda",
		fault: os.Getenv(FaultEnv) == "corrupt" || testFault}
	var err error
	if b.sizes, err = Sweep(o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor); err != nil {
		return nil, err
	}
	if o.Predict {
		if b.model, err = CommModel(comm); err != nil {
			return nil, err
		}
	}
	b.roots = []int{-1}
	if o.Coll.Rooted {
		switch {
		case o.Root == -1:
			b.roots = b.roots[:0]
			for r := range b.n {
				b.roots = append(b.roots, r)
			}
		case o.Root >= b.n:
			return nil, fmt.Errorf("perf: %w: -r %d is not a rank of this %d-rank run (valid: 0..%d, or -1 for every root)", transport.ErrInvalid, o.Root, b.n, b.n-1)
		default:
			b.roots = []int{o.Root}
		}
	}
	capBytes := int(o.span()) + 8*o.Unalign
	if b.device && o.Register == 2 {
		return nil, fmt.Errorf("perf: %w: -R 2 allocates host memory that the ranks share (AllocShared); it does not combine with --device cuda", transport.ErrInvalid)
	}
	if !b.device && o.Register == 2 {
		// Every rank allocates the same sizes in the same order, as AllocShared needs.
		for _, dst := range []*transport.Buffer{&b.sendBuf, &b.recvBuf} {
			mem, err := comm.AllocShared(ctx, max(capBytes, 1))
			if err != nil {
				b.free()
				return nil, fmt.Errorf("perf: -R 2: %w", err)
			}
			b.frees = append(b.frees, func() { comm.FreeShared(context.WithoutCancel(ctx), mem) })
			*dst = goccl.Host(mem[:capBytes])
			b.shared = comm.IsShared(mem)
		}
		return b, nil
	}
	if !b.device {
		if hb == nil {
			hb = &hostBuffers{}
		}
		if len(hb.send) != capBytes {
			hb.send, hb.recv = hostBuffer(capBytes), hostBuffer(capBytes)
		}
		b.sendBuf, b.recvBuf = goccl.Host(hb.send), goccl.Host(hb.recv)
		return b, nil
	}
	alloc := func() (transport.Buffer, error) {
		local := max(comm.LocalRank(), 0)
		buf, free, err := CUDAHooks.Alloc(local, capBytes)
		if err != nil {
			return transport.Buffer{}, fmt.Errorf("perf: allocating %d bytes of device memory: %w", capBytes, err)
		}
		b.frees = append(b.frees, free)
		return buf, nil
	}
	if b.sendBuf, err = alloc(); err != nil {
		return nil, err
	}
	if b.recvBuf, err = alloc(); err != nil {
		b.free()
		return nil, err
	}
	return b, nil
}

func (b *bench) free() {
	for _, f := range b.frees {
		f()
	}
	b.frees = nil
}

// runAll is nccl-tests' run loop: every dtype, op and root, each a full size sweep.
func (b *bench) runAll(ctx context.Context) error {
	ops := b.o.Ops
	if !b.o.Coll.Reduces {
		ops = ops[:1]
	}
	b.collect = true
	for _, dt := range b.o.DTypes {
		for _, op := range ops {
			for _, root := range b.roots {
				tctx, cancel := ctx, context.CancelFunc(func() {})
				if b.o.Timeout > 0 {
					tctx, cancel = context.WithTimeout(ctx, b.o.Timeout)
				}
				err := b.timeTest(tctx, dt, op, root)
				timedOut := tctx.Err() != nil && ctx.Err() == nil
				cancel()
				if err != nil {
					if timedOut {
						b.comm.Abort(err)
						return fmt.Errorf("%w after %v: %w", errTestTimeout, b.o.Timeout, err)
					}
					return err
				}
				b.collect = false
			}
		}
	}
	return nil
}

func (b *bench) timeTest(ctx context.Context, dt transport.DType, op transport.Op, root int) error {
	c, o, es := b.o.Coll, b.o, dt.Size()
	if err := b.comm.Barrier(ctx); err != nil {
		return fmt.Errorf("perf: barrier: %w", err)
	}
	if err := b.warmAll(ctx, dt, op, root); err != nil {
		return err
	}
	opName := "none"
	if c.Reduces {
		opName = op.String()
	}
	for cycle := 0; o.RunCycles == 0 || cycle < o.RunCycles; cycle++ {
		for _, size := range b.sizes {
			k := c.CountsFor(size, es, b.n)
			if b.rep != nil {
				b.rep.RowStart(k.Bytes(es), k.Param, TypeName(dt), opName, root)
			}
			var outOfPlace Half
			for _, inPlace := range []bool{false, true} {
				h, err := b.measure(ctx, k, dt, op, root, inPlace)
				if err != nil {
					if b.rep != nil {
						b.rep.printf("\n")
					}
					return b.describe(err, map[bool]string{false: "out-of-place", true: "in-place"}[inPlace], size, dt, op, root)
				}
				if b.rep != nil {
					b.rep.RowHalf(h, !inPlace)
				}
				if !inPlace {
					outOfPlace = h
				}
				if !inPlace && b.collect && cycle == 0 {
					b.points = append(b.points, Point{Bytes: k.Bytes(es), TimeUs: h.TimeUs, BusBW: h.BusBW, AlgBW: h.AlgBW})
				}
				b.bwSum += h.BusBW
				b.bwCount++
			}
			if b.rep != nil {
				if o.Predict {
					b.rep.RowPredict(b.predict(k.Bytes(es), outOfPlace.TimeUs))
				}
				b.rep.RowEnd()
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if o.Verbose && b.rep != nil {
		b.printStats()
	}
	return nil
}

// warmAll runs -w calls of every warm-up size for the algorithm that is set, or with
// --interleave for every algorithm in turn; a report that replays measured points
// (--interleave's) has nothing to warm.
func (b *bench) warmAll(ctx context.Context, dt transport.DType, op transport.Op, root int) error {
	switch {
	case b.replay != nil:
		return nil
	case b.inter != nil:
		for _, a := range b.inter.algos {
			if err := setAlgo(b.comm, a); err != nil {
				return err
			}
			if err := b.warmup(ctx, dt, op, root); err != nil {
				return fmt.Errorf("--algo %s: %w", a, err)
			}
		}
		return nil
	}
	return b.warmup(ctx, dt, op, root)
}

func (b *bench) warmup(ctx context.Context, dt transport.DType, op transport.Op, root int) error {
	c, o, es := b.o.Coll, b.o, dt.Size()
	for _, size := range WarmupSizes(o.MinBytes, o.MaxBytes) {
		k := c.CountsFor(size, es, b.n)
		// The warm-up calls the way the timed loop will (-z): 20000 queued Works before
		// a blocking loop left a heap's worth of garbage, whose collection could then
		// run during the first timed milliseconds (4 GC cycles in an 8-byte run of 2
		// ranks before, none now).
		var ws []*goccl.Work
		for it := range o.Warmup {
			s, r := b.buffers(k, dt, false, it)
			if o.Blocking == 1 || o.Blocking == 2 {
				if err := b.call(ctx, s, r, k, dt, op, root); err != nil {
					return b.describe(err, "warm-up", size, dt, op, root)
				}
				continue
			}
			ws = append(ws, b.issue(ctx, s, r, k, dt, op, root))
		}
		if err := waitAll(ctx, ws); err != nil {
			return b.describe(err, "warm-up", size, dt, op, root)
		}
	}
	return nil
}

// direct reports whether a call of bytes reads the shared buffers in place (-R 2).
func (b *bench) direct(bytes int64) bool {
	if !b.shared || b.comm.DirectMin() < 0 || !(direct.Algorithm{}).Supports(b.o.Coll.Kind) {
		return false
	}
	if b.comm.Config().Algo == direct.Name {
		return true
	}
	return int(bytes) >= b.comm.DirectMin()
}

// predict is the --predict part of a row: the model's time for the algorithm the
// communicator runs for this call (direct where the buffers are shared, what auto chose,
// or the configured one after any fallback).
func (b *bench) predict(bytes int64, measuredUs float64) Prediction {
	name := direct.Name
	if !b.direct(bytes) {
		name, _ = b.comm.Algo(b.o.Coll.Kind, int(bytes))
	}
	if name == "" || name == "nccl" {
		return Prediction{} // an error, or NCCL's own collective: nothing the model prices
	}
	d, err := b.model.Predict(name, b.o.Coll.Kind, int(bytes), b.n)
	if err != nil {
		return Prediction{}
	}
	return Prediction{Algo: name, TimeUs: float64(d) / float64(time.Microsecond), MeasuredUs: measuredUs}
}

// printStats is -v: rank 0's communicator counters, as "# ..." lines so the table
// stays parseable.
func (b *bench) printStats() {
	st := b.comm.Stats()
	b.rep.printf("# goccl stats rank 0: ops %d errors %d bytes %d\n", st.Ops, st.Errors, st.Bytes)
	names := make([]string, 0, len(st.ByAlgo))
	for k := range st.ByAlgo {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		a := st.ByAlgo[k]
		b.rep.printf("# goccl stats rank 0: algo %s calls %d bytes %d time %v\n", k, a.Calls, a.Bytes, a.Time)
	}
	names = names[:0]
	for k := range st.Transport {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t := st.Transport[k]
		b.rep.printf("# goccl stats rank 0: transport %s links %d sent %d received %d\n", k, t.Links, t.Sent, t.Received)
	}
}

func (b *bench) describe(err error, what string, size int64, dt transport.DType, op transport.Op, root int) error {
	return fmt.Errorf("perf: %s %s %d B %s %s root %d: %w", b.o.Coll.Name, what, size, TypeName(dt), op, root, err)
}

// span is the length the buffers move through: -e's size, or --span's where larger.
func (o *Options) span() int64 { return max(o.MaxBytes, o.SpanBytes) }

// buffers returns the send and receive buffers of one call: shifted by iteration
// (nccl-tests moves the pointers to defeat caches; here through the span), misaligned
// by -u, and for the in-place form carved out of the receive buffer at NCCL's offsets.
func (b *bench) buffers(k Counts, dt transport.DType, inPlace bool, iter int) (send, recv transport.Buffer) {
	es := int64(dt.Size())
	total := max(k.Send, k.Recv) * es
	off := int64(b.o.Unalign)*es + total*(int64(iter)%b.shifts(k, dt))
	sb, rb := k.Send*es, k.Recv*es
	slice := func(buf transport.Buffer, at, n int64) transport.Buffer {
		s, err := buf.Slice(int(at), int(n))
		if err != nil { // cannot happen: capBytes covers the largest size
			panic(err)
		}
		return s
	}
	if !inPlace {
		return slice(b.sendBuf, off, sb), slice(b.recvBuf, off, rb)
	}
	r := int64(b.rank)
	return slice(b.recvBuf, off+r*k.SendInplace*es, sb), slice(b.recvBuf, off+r*k.RecvInplace*es, rb)
}

// shifts is how many positions buffers cycles through for a call of k: 1 when the
// span (the run's largest size, or --span) holds only one.
func (b *bench) shifts(k Counts, dt transport.DType) int64 {
	if total := max(k.Send, k.Recv) * int64(dt.Size()); total > 0 {
		return max(1, b.o.span()/total)
	}
	return 1
}

// issue queues the collective (all calls are asynchronous, like a CUDA launch).
func (b *bench) issue(ctx context.Context, s, r transport.Buffer, k Counts, dt transport.DType, op transport.Op, root int) *goccl.Work {
	c, n := b.comm, int(k.Param)
	switch b.o.Coll.Kind {
	case transport.KindAllReduce:
		return c.AllReduceAsync(ctx, s, r, n, dt, op)
	case transport.KindReduce:
		return c.ReduceAsync(ctx, s, r, n, dt, op, root)
	case transport.KindBroadcast:
		return c.BroadcastAsync(ctx, s, r, n, dt, root)
	case transport.KindAllGather:
		return c.AllGatherAsync(ctx, s, r, n, dt)
	case transport.KindReduceScatter:
		return c.ReduceScatterAsync(ctx, s, r, n, dt, op)
	case transport.KindGather:
		return c.GatherAsync(ctx, s, r, n, dt, root)
	case transport.KindScatter:
		return c.ScatterAsync(ctx, s, r, n, dt, root)
	case transport.KindAllToAll:
		return c.AllToAllAsync(ctx, s, r, n, dt)
	}
	// sendrecv: each rank sends to the next and receives from the previous.
	return c.SendRecvAsync(ctx, s, (b.rank+1)%b.n, r, (b.rank-1+b.n)%b.n, n, dt)
}

// call runs one collective with the blocking API, which is what -z 1 and -z 2 (a wait
// after every operation) time: on an idle communicator it runs on the caller's
// goroutine with nothing allocated, where issue-then-wait queues a Work first.
func (b *bench) call(ctx context.Context, s, r transport.Buffer, k Counts, dt transport.DType, op transport.Op, root int) error {
	c, n := b.comm, int(k.Param)
	switch b.o.Coll.Kind {
	case transport.KindAllReduce:
		return c.AllReduce(ctx, s, r, n, dt, op)
	case transport.KindReduce:
		return c.Reduce(ctx, s, r, n, dt, op, root)
	case transport.KindBroadcast:
		return c.Broadcast(ctx, s, r, n, dt, root)
	case transport.KindAllGather:
		return c.AllGather(ctx, s, r, n, dt)
	case transport.KindReduceScatter:
		return c.ReduceScatter(ctx, s, r, n, dt, op)
	case transport.KindGather:
		return c.Gather(ctx, s, r, n, dt, root)
	case transport.KindScatter:
		return c.Scatter(ctx, s, r, n, dt, root)
	case transport.KindAllToAll:
		return c.AllToAll(ctx, s, r, n, dt)
	}
	return c.SendRecv(ctx, s, (b.rank+1)%b.n, r, (b.rank-1+b.n)%b.n, n, dt)
}

// once runs one collective the way the timed loop does (blocking for -z 1 and 2), so
// the check (-c) verifies the path that was timed.
func (b *bench) once(ctx context.Context, s, r transport.Buffer, k Counts, dt transport.DType, op transport.Op, root int) error {
	if b.o.Blocking == 1 || b.o.Blocking == 2 {
		return b.call(ctx, s, r, k, dt, op, root)
	}
	return b.issue(ctx, s, r, k, dt, op, root).Wait(ctx)
}

// waitAll waits for the last operation first, as nccl-tests synchronises its stream
// once: a waiting caller runs the queued operations itself (Work.Wait), so waiting for
// the last runs them all on this goroutine, with no hand-off per operation.
func waitAll(ctx context.Context, ws []*goccl.Work) error {
	if len(ws) > 0 {
		_ = ws[len(ws)-1].Wait(ctx) // its error, if any, is reported in issue order below
	}
	var first error
	for _, w := range ws {
		if err := w.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// benchTime times one half of a row and checks its data (nccl-tests' BenchTime).
// iters is -n, or with --interleave one block's share of it; checks is -c, or with
// --interleave 0 for every block of an algorithm's row but its last.
func (b *bench) benchTime(ctx context.Context, k Counts, dt transport.DType, op transport.Op, root int, inPlace bool, iters, checks int) (Half, error) {
	o := b.o
	s, r := b.buffers(k, dt, inPlace, 0)
	if err := b.once(ctx, s, r, k, dt, op, root); err != nil {
		return Half{}, err
	}
	if err := b.comm.Barrier(ctx); err != nil {
		return Half{}, err
	}
	var pending []*goccl.Work
	var iterTimes []float64
	var excluded time.Duration
	// Buffers that do not move (this size is the run's largest) are sliced once: the
	// slicing and its two divisions were a tenth of an 8-byte call's time.
	fixed := b.shifts(k, dt) == 1
	start := time.Now()
	for it := range iters {
		var t0 time.Time
		if o.PerIter { // a clock read costs 40-70 ns here: not on a loop that does not use it
			t0 = time.Now()
		}
		for range o.AggIters {
			if !fixed {
				s, r = b.buffers(k, dt, inPlace, it)
			}
			switch o.Blocking {
			case 1, 2:
				if err := b.call(ctx, s, r, k, dt, op, root); err != nil {
					return Half{}, err
				}
				if o.Blocking == 1 {
					if err := b.comm.Barrier(ctx); err != nil {
						return Half{}, err
					}
				}
			default:
				pending = append(pending, b.issue(ctx, s, r, k, dt, op, root))
			}
		}
		if o.Blocking == 3 || o.PerIter {
			if err := waitAll(ctx, pending); err != nil {
				return Half{}, err
			}
			pending = pending[:0]
		}
		if o.PerIter {
			iterTimes = append(iterTimes, time.Since(t0).Seconds()/float64(o.AggIters))
		}
		if o.Blocking == 3 {
			tb := time.Now()
			if err := b.comm.Barrier(ctx); err != nil {
				return Half{}, err
			}
			excluded += time.Since(tb)
		}
	}
	cpu := time.Since(start)
	if err := waitAll(ctx, pending); err != nil {
		return Half{}, err
	}
	elapsed := time.Since(start) - excluded
	ops := float64(iters * o.AggIters)
	t := []float64{elapsed.Seconds() / ops, cpu.Seconds() / ops}
	if err := b.combine(ctx, t); err != nil {
		return Half{}, err
	}
	sec := t[0]
	if o.CPUTime {
		sec = t[1]
	}
	var h Half
	es := dt.Size()
	h.TimeUs = sec * 1e6
	// Bandwidth uses the completion time even with -C, as nccl-tests does.
	h.AlgBW, h.BusBW = b.o.Coll.Bandwidth(k, es, b.n, t[0])
	if o.PerIter {
		st, err := b.iterStats(ctx, iterTimes)
		if err != nil {
			return Half{}, err
		}
		h.Iter = st
	}
	b.seed++
	for c := range checks {
		wrong, err := b.check(ctx, k, dt, op, root, inPlace, b.seed*64+uint64(c))
		if err != nil {
			return Half{}, err
		}
		h.Wrong, h.Checked = wrong, true
		if wrong > 0 {
			break
		}
	}
	h.Checked = checks > 0
	return h, nil
}

// combine merges per-rank times per -a: 0 rank 0's, 1 the average, 2 min, 3 max.
func (b *bench) combine(ctx context.Context, t []float64) error {
	buf := goccl.HostSlice(t)
	var err error
	switch b.o.Average {
	case 0:
		err = b.comm.Broadcast(ctx, buf, buf, len(t), goccl.Float64, 0)
	case 1:
		if err = b.comm.AllReduce(ctx, buf, buf, len(t), goccl.Float64, goccl.Sum); err == nil {
			for i := range t {
				t[i] /= float64(b.n)
			}
		}
	case 2:
		err = b.comm.AllReduce(ctx, buf, buf, len(t), goccl.Float64, goccl.Min)
	default:
		err = b.comm.AllReduce(ctx, buf, buf, len(t), goccl.Float64, goccl.Max)
	}
	if err != nil {
		return fmt.Errorf("combining times across ranks: %w", err)
	}
	return nil
}

func (b *bench) sumInt(ctx context.Context, v int64) (int64, error) {
	x := []int64{v}
	err := b.comm.AllReduce(ctx, goccl.HostSlice(x), goccl.HostSlice(x), 1, goccl.Int64, goccl.Sum)
	return x[0], err
}

// iterStats turns per-iteration times into -I statistics over the per-iteration
// maximum across ranks (nccl-tests: "i_* uses max over process rows").
func (b *bench) iterStats(ctx context.Context, times []float64) (*IterStats, error) {
	n := len(times)
	mx := slices.Clone(times)
	if err := b.comm.AllReduce(ctx, goccl.HostSlice(mx), goccl.HostSlice(mx), n, goccl.Float64, goccl.Max); err != nil {
		return nil, err
	}
	all := make([]float64, n*b.n)
	if err := b.comm.AllGather(ctx, goccl.HostSlice(times), goccl.HostSlice(all), n, goccl.Float64); err != nil {
		return nil, err
	}
	st := &IterStats{Times: mx, Skipped: b.o.PerIterSkip}
	for r := range b.n {
		st.PerRank = append(st.PerRank, all[r*n:(r+1)*n])
	}
	s := slices.Clone(mx[b.o.PerIterSkip:])
	sort.Float64s(s)
	m := len(s)
	pct := func(p int) float64 { return s[min(m-1, (m*p+99)/100-1)] }
	st.Min, st.Max, st.P50, st.P95, st.P99 = s[0], s[m-1], s[m/2], pct(95), pct(99)
	for _, v := range s {
		st.Avg += v
	}
	st.Avg /= float64(m)
	for _, v := range s {
		st.Stdev += (v - st.Avg) * (v - st.Avg)
	}
	st.Stdev = math.Sqrt(st.Stdev / float64(m))
	if st.Avg > 0 {
		st.CVPct = st.Stdev / st.Avg * 100
	}
	return st, nil
}

// check runs the collective once on generated data and returns the wrong elements
// summed over ranks.
func (b *bench) check(ctx context.Context, k Counts, dt transport.DType, op transport.Op, root int, inPlace bool, seed uint64) (int64, error) {
	chk := &Check{Coll: b.o.Coll, DType: dt, Op: op, Root: root, N: b.n, Rank: b.rank, Seed: seed, K: k}
	s, r := b.buffers(k, dt, inPlace, 0)
	es := int64(dt.Size())
	sendHost, recvHost, err := b.hostViews(ctx, s, r, k, es)
	if err != nil {
		return 0, err
	}
	clear(recvHost)
	if !inPlace || !b.device {
		chk.Fill(sendHost)
	}
	if b.device {
		if err := b.stageIn(ctx, s, r, sendHost, recvHost, chk, inPlace); err != nil {
			return 0, err
		}
	}
	if err := b.once(ctx, s, r, k, dt, op, root); err != nil {
		return 0, err
	}
	if b.device {
		if err := b.stageOut(ctx, r, recvHost); err != nil {
			return 0, err
		}
	}
	faultRank := b.n - 1
	if b.o.Coll.Kind == transport.KindReduce || b.o.Coll.Kind == transport.KindGather {
		faultRank = root
	}
	if b.fault && b.rank == faultRank && k.Recv > 0 {
		recvHost[es-1] ^= 0x40 // an exponent bit for floats: never within avg's tolerance
	}
	local := chk.Verify(recvHost)
	if local > 0 {
		b.errors++
	}
	total, err := b.sumInt(ctx, local)
	if err != nil {
		return 0, fmt.Errorf("summing wrong elements: %w", err)
	}
	return total, nil
}
