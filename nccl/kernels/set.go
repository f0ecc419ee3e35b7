package kernels

import (
	"fmt"
	"sync"

	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/nccl/nvrtc"
	"github.com/goccl/goccl/transport"
)

// Options are the NVRTC options every group is compiled with. --fmad=false keeps a*b+c
// as two IEEE operations, like the host code the kernels mirror (Go on amd64 does not
// fuse), so AdamW and the casts agree with the host bit for bit; division and sqrt are
// IEEE-exact by default (no --use_fast_math).
var Options = []string{"--fmad=false", "--std=c++17"}

// Block is the threads per block of every launch.
const Block = 256

// Set is one group's kernels compiled for and loaded on one device.
type Set struct {
	dev   cuda.Device
	group Group
	mod   *cuda.Module
	prog  *nvrtc.Program
	maxGr int

	mu  sync.Mutex
	fns map[string]*cuda.Function
}

// Load compiles the group for dev's architecture (through nv's per-process cache) and
// loads it through the driver. It needs a GPU: without one the driver's or the
// runtime's error (wrapping transport.ErrNotSupported) comes back.
func Load(dev cuda.Device, drv *cuda.Driver, nv *nvrtc.Lib, g Group) (*Set, error) {
	if len(Kernels(g)) == 0 {
		return nil, fmt.Errorf("kernels: %w: unknown group %v (valid: Training, Reductions)", transport.ErrInvalid, g)
	}
	arch, err := drv.Arch(dev.Ordinal())
	if err != nil {
		return nil, fmt.Errorf("kernels: architecture of device %d: %w", dev.Ordinal(), err)
	}
	prog, err := nv.Compile(Source(g), "goccl_"+g.String()+".cu", arch, Options...)
	if err != nil {
		return nil, fmt.Errorf("kernels: %w", err)
	}
	mod, err := drv.LoadModule(dev, prog.Image)
	if err != nil {
		return nil, fmt.Errorf("kernels: load the %s %s for sm_%d: %w", g, prog.Kind, arch, err)
	}
	sms, err := drv.Attribute(cuda.AttrMultiProcessorCount, dev.Ordinal())
	if err != nil || sms < 1 {
		sms = 1
	}
	return &Set{dev: dev, group: g, mod: mod, prog: prog, maxGr: 8 * sms, fns: map[string]*cuda.Function{}}, nil
}

// Program is what NVRTC produced for this set (its Kind says cubin or ptx).
func (s *Set) Program() *nvrtc.Program { return s.prog }

// Device is the set's device.
func (s *Set) Device() cuda.Device { return s.dev }

// Close unloads the module.
func (s *Set) Close() error { return s.mod.Unload() }

func (s *Set) fn(name string) (*cuda.Function, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.fns[name]; ok {
		return f, nil
	}
	f, err := s.mod.Function(name)
	if err != nil {
		return nil, fmt.Errorf("kernels: %s group: %w", s.group, err)
	}
	s.fns[name] = f
	return f, nil
}

// launch runs kernel name over n elements (n threads' worth of grid-stride loop).
func (s *Set) launch(st *cuda.Stream, name string, n int, args ...cuda.Arg) error {
	if n < 0 {
		return fmt.Errorf("kernels: %w: %s over %d elements (want >= 0)", transport.ErrInvalid, name, n)
	}
	if n == 0 {
		return nil
	}
	f, err := s.fn(name)
	if err != nil {
		return err
	}
	grid := min((n+Block-1)/Block, s.maxGr)
	if err := f.Launch(st, cuda.Dim(grid), cuda.Dim(Block), 0, args...); err != nil {
		return fmt.Errorf("kernels: %w", err)
	}
	return nil
}

func working(dt transport.DType, what string) error {
	for _, w := range WorkingTypes {
		if dt == w {
			return nil
		}
	}
	return fmt.Errorf("kernels: %w: %s type %s (valid: float32, float16, bfloat16)", transport.ErrInvalid, what, dt)
}

func (s *Set) need(g Group, what string) error {
	if s.group != g {
		return fmt.Errorf("kernels: %w: %s is in the %s group, this set is %s", transport.ErrInvalid, what, g, s.group)
	}
	return nil
}

// Cast queues dst = src*scale (or dst += src*scale when accumulate) over n elements,
// converting between float32, float16 and bfloat16 with round-to-nearest-even.
func (s *Set) Cast(st *cuda.Stream, dst uintptr, dt transport.DType, src uintptr, sdt transport.DType, n int, scale float32, accumulate bool) error {
	if err := s.need(Training, "Cast"); err != nil {
		return err
	}
	if err := working(dt, "cast destination"); err != nil {
		return err
	}
	if err := working(sdt, "cast source"); err != nil {
		return err
	}
	acc := int32(0)
	if accumulate {
		acc = 1
	}
	return s.launch(st, CastName(dt, sdt), n, cuda.PtrArg(dst), cuda.PtrArg(src), cuda.I64Arg(int64(n)), cuda.F32Arg(scale), cuda.I32Arg(acc))
}

// NonFinite queues a scan of n elements that stores 1 into the int32 at flag when any
// is Inf or NaN (flag is left alone otherwise: clear it first).
func (s *Set) NonFinite(st *cuda.Stream, x uintptr, dt transport.DType, n int, flag uintptr) error {
	if err := s.need(Training, "NonFinite"); err != nil {
		return err
	}
	if err := working(dt, "overflow check"); err != nil {
		return err
	}
	return s.launch(st, NonFiniteName(dt), n, cuda.PtrArg(x), cuda.I64Arg(int64(n)), cuda.PtrArg(flag))
}

// ScaleCheck queues x *= scale over n elements and stores 1 into the int32 at flag when
// any input was Inf or NaN: loss unscaling with the overflow check in one pass.
func (s *Set) ScaleCheck(st *cuda.Stream, x uintptr, dt transport.DType, n int, scale float32, flag uintptr) error {
	if err := s.need(Training, "ScaleCheck"); err != nil {
		return err
	}
	if err := working(dt, "loss scaling"); err != nil {
		return err
	}
	return s.launch(st, ScaleCheckName(dt), n, cuda.PtrArg(x), cuda.I64Arg(int64(n)), cuda.F32Arg(scale), cuda.PtrArg(flag))
}

// AdamW is one fused AdamW update in device memory (see dp.AdamWArgs): Master, M and V
// are float32; Grad is GradType; Param (0 when the master weights are the parameters)
// receives the new weights rounded to ParamType.
type AdamW struct {
	N                         int
	Master, M, V, Grad, Param uintptr
	GradType, ParamType       transport.DType
	GradScale                 float32
	LR, Beta1, Beta2, Eps     float32
	Decay                     float32 // 1 - LR*WeightDecay, computed by the caller in float32
	C1, C2                    float32 // bias corrections 1-b1^t, 1-b2^t
}

// AdamW queues the update.
func (s *Set) AdamW(st *cuda.Stream, a *AdamW) error {
	if err := s.need(Training, "AdamW"); err != nil {
		return err
	}
	if err := working(a.GradType, "AdamW gradient"); err != nil {
		return err
	}
	aliased := a.Param == 0
	if !aliased && a.ParamType != transport.Float16 && a.ParamType != transport.BFloat16 {
		return fmt.Errorf("kernels: %w: AdamW parameter type %s (valid: float16, bfloat16; float32 parameters are the master weights, pass Param 0)", transport.ErrInvalid, a.ParamType)
	}
	return s.launch(st, AdamWName(a.GradType, a.ParamType, aliased), a.N,
		cuda.PtrArg(a.Master), cuda.PtrArg(a.M), cuda.PtrArg(a.V), cuda.PtrArg(a.Grad), cuda.PtrArg(a.Param),
		cuda.I64Arg(int64(a.N)), cuda.F32Arg(a.GradScale), cuda.F32Arg(a.LR), cuda.F32Arg(a.Beta1), cuda.F32Arg(a.Beta2),
		cuda.F32Arg(a.Eps), cuda.F32Arg(a.Decay), cuda.F32Arg(a.C1), cuda.F32Arg(a.C2))
}

// Reduce queues dst = a op b over n elements of dt (Avg combines as Sum; finish it
// with Avg). Results match algos/reduce.Apply3 bit for bit.
func (s *Set) Reduce(st *cuda.Stream, dt transport.DType, op transport.Op, dst, a, b uintptr, n int) error {
	if err := s.need(Reductions, "Reduce"); err != nil {
		return err
	}
	if _, ok := ctype[dt]; !ok {
		return fmt.Errorf("kernels: %w: reduce dtype %d (valid: int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16)", transport.ErrInvalid, uint8(dt))
	}
	if op == transport.Avg {
		op = transport.Sum
	}
	if !op.Valid() {
		return fmt.Errorf("kernels: %w: reduce op %d (valid: sum, prod, max, min, avg)", transport.ErrInvalid, uint8(op))
	}
	return s.launch(st, ReduceName(dt, op), n, cuda.PtrArg(dst), cuda.PtrArg(a), cuda.PtrArg(b), cuda.I64Arg(int64(n)))
}

// Avg queues x /= world over n elements of dt: integers truncate toward zero, as
// NCCL's ncclAvg; float16 and bfloat16 divide in float32 with one rounding.
func (s *Set) Avg(st *cuda.Stream, dt transport.DType, x uintptr, n, world int) error {
	if err := s.need(Reductions, "Avg"); err != nil {
		return err
	}
	if _, ok := ctype[dt]; !ok {
		return fmt.Errorf("kernels: %w: avg dtype %d", transport.ErrInvalid, uint8(dt))
	}
	if world < 1 {
		return fmt.Errorf("kernels: %w: avg over a world of %d ranks (want >= 1)", transport.ErrInvalid, world)
	}
	return s.launch(st, AvgName(dt), n, cuda.PtrArg(x), cuda.I64Arg(int64(n)), cuda.I64Arg(int64(world)))
}

// Zero queues clearing n bytes at p (in 4-byte words when p and n allow).
func (s *Set) Zero(st *cuda.Stream, p uintptr, n int) error {
	if err := s.need(Training, "Zero"); err != nil {
		return err
	}
	if p%4 == 0 && n%4 == 0 {
		return s.launch(st, Zero32Name, n/4, cuda.PtrArg(p), cuda.I64Arg(int64(n/4)))
	}
	return s.launch(st, Zero8Name, n, cuda.PtrArg(p), cuda.I64Arg(int64(n)))
}

// BiasRows queues y[r][c] = b[c] for a rows x cols row-major y.
func (s *Set) BiasRows(st *cuda.Stream, y, b uintptr, rows, cols int) error {
	if cols < 1 && rows > 0 {
		return fmt.Errorf("kernels: %w: bias over %d columns", transport.ErrInvalid, cols)
	}
	return s.launch(st, BiasRowsName, rows*cols, cuda.PtrArg(y), cuda.PtrArg(b), cuda.I64Arg(int64(rows*cols)), cuda.I64Arg(int64(cols)))
}

// ReLU queues y = max(y, 0) over n floats.
func (s *Set) ReLU(st *cuda.Stream, y uintptr, n int) error {
	return s.launch(st, ReLUName, n, cuda.PtrArg(y), cuda.I64Arg(int64(n)))
}

// ReLUMask queues dx = 0 where act <= 0, over n floats.
func (s *Set) ReLUMask(st *cuda.Stream, dx, act uintptr, n int) error {
	return s.launch(st, ReLUMaskName, n, cuda.PtrArg(dx), cuda.PtrArg(act), cuda.I64Arg(int64(n)))
}

// SoftmaxXent queues the softmax cross-entropy of rows x cols logits against int32
// labels: d gets the gradient of scale*mean loss, rowloss (float64, one per row) each
// row's loss term, to be summed in row order by the caller.
func (s *Set) SoftmaxXent(st *cuda.Stream, logits, labels, d, rowloss uintptr, rows, cols int, scale float32) error {
	if cols < 1 && rows > 0 {
		return fmt.Errorf("kernels: %w: softmax over %d classes", transport.ErrInvalid, cols)
	}
	return s.launch(st, SoftmaxXentName, rows, cuda.PtrArg(logits), cuda.PtrArg(labels), cuda.PtrArg(d), cuda.PtrArg(rowloss),
		cuda.I64Arg(int64(rows)), cuda.I64Arg(int64(cols)), cuda.F32Arg(scale))
}

// ColSum queues db[c] += sum over rows of dy[r][c] (rows in order).
func (s *Set) ColSum(st *cuda.Stream, db, dy uintptr, rows, cols int) error {
	if rows == 0 {
		return nil
	}
	return s.launch(st, ColSumName, cols, cuda.PtrArg(db), cuda.PtrArg(dy), cuda.I64Arg(int64(rows)), cuda.I64Arg(int64(cols)))
}
