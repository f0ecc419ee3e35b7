package tune

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/goccl/goccl/algos"
	_ "github.com/goccl/goccl/algos/rd" // calibration times every built-in AllReduce, rd included
	"github.com/goccl/goccl/transport"
)

// Comm is what Calibrate needs of a communicator; *goccl.Comm has it. Every rank of
// the communicator must call Calibrate at the same point of its sequence of operations.
type Comm interface {
	Rank() int
	Size() int
	TransportOf(peer int) string
	SetAlgo(spec string) error
	AllReduce(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) error
}

// Options bound a calibration. The zero value is the full sweep.
type Options struct {
	// Quick measures 4 sizes with ring, naive and rd (and staged over shm) in one round,
	// well under a second (for Init).
	Quick bool
	// Sizes and Algos replace the sweep's (bytes, as algos.Bytes counts AllReduce).
	// StagedAlgo among Algos is timed for Result.Staged, not fitted; the default sweep
	// times it where the links are shm.
	Sizes []int
	Algos []string
	// PerPoint is the time spent timing one algorithm at one size in one round (default
	// 10 ms quick, 100 ms full); the iteration count is derived from a first timed call,
	// identically on every rank.
	PerPoint time.Duration
	// Rounds is how many times the sweep is timed (default 1 quick, 3 full); a point is
	// its fastest round. Each round times every algorithm at one size before the next
	// size, in an order that turns with the round, so that a slow spell of a shared
	// machine (other guests taking its cores) lands on all the algorithms of a size
	// alike rather than on one algorithm's whole sweep.
	Rounds int
	// MaxIters bounds the iterations per point (default 200 quick, 1000 full).
	MaxIters int
	// ChunkBytes is the communicator's pipelining unit (Config.ChunkBytes; 0 = default).
	ChunkBytes int
	// Cores is how many CPU cores the ranks share (default runtime.NumCPU(): every rank
	// of a calibration runs on this host, as goccl tune starts them).
	Cores int
	// EagerBytes is the links' eager size (the communicator's agreed transport.Eager;
	// default: the built-in model's for the transport, see ModelFor).
	EagerBytes int
	// Restore is the algorithm spec to set again afterwards (default "auto").
	Restore string
}

// Default sweeps.
var (
	// Sizes on both sides of algos.EagerBytes (16 KiB), where every algorithm moves
	// from the caller's goroutine to the pipelined path (the Async term).
	quickSizes = []int{8, 8 << 10, 64 << 10, 1 << 20}
	quickAlgos = []string{"ring", "naive", "rd"}
	// 64 KiB is there for the staged range's lower end, which falls between 32 and 128
	// KiB at 3 and 4 ranks (BENCHMARKS.md, "Speed", 20).
	fullSizes = []int{8, 64, 512, 4 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 512 << 10, 2 << 20, 8 << 20, 32 << 20, 128 << 20}
	fullAlgos = []string{"ring", "tree", "naive", "rd"}
)

func (o Options) withDefaults() Options {
	if o.Sizes == nil {
		o.Sizes = fullSizes
		if o.Quick {
			o.Sizes = quickSizes
		}
	}
	if o.Algos == nil {
		o.Algos = fullAlgos
		if o.Quick {
			o.Algos = quickAlgos
		}
	}
	if o.PerPoint <= 0 {
		o.PerPoint = 100 * time.Millisecond
		if o.Quick {
			o.PerPoint = 10 * time.Millisecond
		}
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
		if o.Quick {
			o.Rounds = 1
		}
	}
	if o.MaxIters <= 0 {
		o.MaxIters = 1000
		if o.Quick {
			o.MaxIters = 200
		}
	}
	if o.Restore == "" {
		o.Restore = "auto"
	}
	if o.Cores <= 0 {
		o.Cores = runtime.NumCPU()
	}
	return o
}

// Result is a calibration: the fitted model of the communicator's transport, the
// samples it was fitted to (identical on every rank) and its worst relative error.
type Result struct {
	World     int
	Transport string
	Models    Models
	Samples   []Point
	FitError  float64
	// Staged is where the staged AllReduce won (FitStaged); nil where it was not timed.
	Staged *StagedRange
}

// Calibrate times AllReduce (float32 sum) with each algorithm at each size and fits the
// transport's cost model to the times; see the package comment. Every rank gets the
// same Result. The communicator's algorithm spec is left at opts.Restore.
func Calibrate(ctx context.Context, c Comm, opts Options) (Result, error) {
	o := opts.withDefaults()
	w := c.Size()
	if w < 2 {
		return Result{}, fmt.Errorf("tune: %w: calibration needs at least 2 ranks; this communicator has %d", transport.ErrInvalid, w)
	}
	name, err := linkTransport(c)
	if err != nil {
		return Result{}, err
	}
	maxBytes := 0
	for _, n := range o.Sizes {
		if n < 0 || n%4 != 0 {
			return Result{}, fmt.Errorf("tune: %w: size %d bytes is not a whole number of float32 elements", transport.ErrInvalid, n)
		}
		maxBytes = max(maxBytes, n)
	}
	send, recv := make([]float32, maxBytes/4), make([]float32, maxBytes/4)
	for i := range send { // fault every page in now, not in the first timed batches
		send[i], recv[i] = 1, 1
	}
	defer func() { _ = c.SetAlgo(o.Restore) }()
	algs := o.Algos
	if opts.Algos == nil && name == "shm" {
		algs = append(algs[:len(algs):len(algs)], StagedAlgo)
	}
	best := map[Point]float64{} // by algorithm and size (Seconds zero)
	for round := range o.Rounds {
		for i := range o.Sizes {
			n := o.Sizes[i]
			if round%2 == 1 {
				n = o.Sizes[len(o.Sizes)-1-i]
			}
			for j := range algs {
				alg := algs[(j+round)%len(algs)]
				if alg == StagedAlgo && n <= algos.SmallExchangeMax {
					continue // auto never stages those
				}
				if err := c.SetAlgo(alg); err != nil {
					return Result{}, fmt.Errorf("tune: algorithm %q: %w", alg, err)
				}
				s, err := timePoint(ctx, c, o, send, recv, n/4)
				if err != nil {
					return Result{}, fmt.Errorf("tune: rank %d: timing %s at %d bytes: %w", c.Rank(), alg, n, err)
				}
				k := Point{Algo: alg, Bytes: n}
				if t, ok := best[k]; !ok || s < t {
					best[k] = s
				}
			}
		}
	}
	var pts, stagedPts []Point
	var staged *StagedRange
	for _, alg := range algs {
		for _, n := range o.Sizes {
			if t, ok := best[Point{Algo: alg, Bytes: n}]; ok {
				p := Point{Algo: alg, Bytes: n, Seconds: t}
				if alg == StagedAlgo {
					stagedPts = append(stagedPts, p)
				} else {
					pts = append(pts, p)
				}
			}
		}
	}
	if o.EagerBytes <= 0 {
		o.EagerBytes = builtin(name).EagerBytes
	}
	m, worst, err := Fit(pts, w, ShapeOf(name, o.ChunkBytes, o.Cores, o.EagerBytes))
	if err != nil {
		return Result{}, err
	}
	if slices.Contains(algs, StagedAlgo) {
		r := FitStaged(w, stagedPts, autoPicks(pts, m, w))
		staged = &r
	}
	return Result{World: w, Transport: name, Models: Models{name: m}, Samples: pts, FitError: worst, Staged: staged}, nil
}

// autoPicks keeps, of the samples at each size, the one of the algorithm that auto
// takes there under model m (what a call runs when it does not stage), or all of them
// where that algorithm was not timed. Staged pays where it beats that algorithm, not the
// fastest one: at 3 ranks auto's ring took 1.2-1.4x naive's and staged's time at 32-128
// MiB, where staged and naive tied (BENCHMARKS.md, "Speed", 20).
func autoPicks(pts []Point, m algos.CostModel, world int) []Point {
	timed := map[Point]bool{}
	for _, p := range pts {
		timed[Point{Algo: p.Algo, Bytes: p.Bytes}] = true
	}
	var out []Point
	for _, p := range pts {
		a, _, err := algos.Resolve(algos.Auto, transport.KindAllReduce, p.Bytes, world, m)
		if err != nil || !timed[Point{Algo: a.Name(), Bytes: p.Bytes}] || a.Name() == p.Algo {
			out = append(out, p)
		}
	}
	return out
}

// linkTransport is the one transport all of this rank's links use.
func linkTransport(c Comm) (string, error) {
	name := ""
	for p := range c.Size() {
		if p == c.Rank() {
			continue
		}
		t := c.TransportOf(p)
		switch {
		case name == "":
			name = t
		case t != name:
			return "", fmt.Errorf("tune: %w: rank %d reaches rank %d over %s and others over %s; calibrate on a communicator with one transport (goccl tune --transport %s)",
				transport.ErrInvalid, c.Rank(), p, t, name, name)
		}
	}
	return name, nil
}

// timePoint returns the slowest rank's time of one AllReduce of count floats. A first
// call, timed and agreed on, sets the iteration count every rank then runs, in batches;
// each rank keeps its fastest batch's mean, since on a shared machine other work only
// ever adds time, and one descheduled batch must not become the model. Call after call
// the buffers move through send and recv (the sweep's largest size), as goccl perf and
// nccl-tests move them: timed on one buffer, a size that fits the cache ran from it,
// 2-2.6x faster than with moving buffers at 128-512 KiB, and the algorithms that read
// their input in place gained more from that than staged (BENCHMARKS.md, "Speed", 20).
func timePoint(ctx context.Context, c Comm, o Options, send, recv []float32, count int) (float64, error) {
	shifts := 1
	if count > 0 {
		shifts = len(send) / count
	}
	at := 0
	one := func() error {
		off := at % shifts * count
		at++
		s, r := buffer(send[off:off+count]), buffer(recv[off:off+count])
		return c.AllReduce(ctx, s, r, count, transport.Float32, transport.Sum)
	}
	if err := one(); err != nil { // warm-up: first-touch pages, scratch pools
		return 0, err
	}
	t0 := time.Now()
	if err := one(); err != nil {
		return 0, err
	}
	first, err := agreeMax(ctx, c, time.Since(t0).Seconds())
	if err != nil {
		return 0, err
	}
	const batches = 4
	iters := int(o.PerPoint.Seconds() / batches / max(first, 1e-9))
	iters = max(1, min(iters, o.MaxIters/batches))
	best := first
	for range batches {
		t0 = time.Now()
		for range iters {
			if err := one(); err != nil {
				return 0, err
			}
		}
		best = min(best, time.Since(t0).Seconds()/float64(iters))
	}
	return agreeMax(ctx, c, best)
}

// agreeMax returns the largest v over the ranks, the same on every rank.
func agreeMax(ctx context.Context, c Comm, v float64) (float64, error) {
	x := []float64{v}
	b := transport.HostBuffer(unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 8))
	if err := c.AllReduce(ctx, b, b, 1, transport.Float64, transport.Max); err != nil {
		return 0, err
	}
	return x[0], nil
}

func buffer(f []float32) transport.Buffer {
	if len(f) == 0 {
		return transport.HostBuffer([]byte{})
	}
	return transport.HostBuffer(unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f)))
}

// File is the result as `goccl tune` saves it, samples and fit error included.
func (r Result) File() File {
	f := NewFile(r.Models, r.World)
	if m, ok := f.Models[r.Transport]; ok {
		m.FitError = r.FitError
		f.Models[r.Transport] = m
		f.Samples = map[string][]Point{r.Transport: r.Samples}
	}
	if r.Staged != nil {
		f.Staged = []StagedRange{*r.Staged}
	}
	return f
}
