package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/nccl/cublas"
	cu "github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/nccl/kernels"
	"github.com/goccl/goccl/nccl/nvrtc"
	"github.com/goccl/goccl/transport"
)

// Options says which GPU to use and where its libraries are.
type Options struct {
	// Ordinal is the CUDA device; -1 picks Rank modulo the number of devices (one rank
	// per GPU, or several ranks sharing GPUs round-robin).
	Ordinal, Rank int
	// Params are the communicator's parameters: "cuda.lib", "cuda.driver", "nvrtc.lib"
	// (or "cuda.nvrtc") and "cublas.lib" (or "cuda.cublas") name the libraries, empty to
	// search; from the environment they are GOCCL_CUDA_LIB, GOCCL_CUDA_DRIVER,
	// GOCCL_CUDA_NVRTC and GOCCL_CUDA_CUBLAS.
	Params map[string]string
}

// Device is a dp.Device on one GPU: buffers are device memory, and the element-wise
// work runs as NVRTC-compiled kernels on one non-blocking stream. Every method returns
// with its work finished, because the communicator's staging (or NCCL) reads and
// writes the buffers on streams of its own, which nothing else orders with this one.
type Device struct {
	rt   *cu.Runtime
	drv  *cu.Driver
	nv   *nvrtc.Lib
	bl   *cublas.Lib
	dev  cu.Device
	s    *cu.Stream
	k    *kernels.Set
	h    *cublas.Handle
	flag uintptr // one device int32 for NonFinite

	mu         sync.Mutex
	live, peak atomic.Int64
	closed     bool
}

var alias = map[string]string{"nvrtc.lib": "cuda.nvrtc", "cublas.lib": "cuda.cublas"}

// ErrNoDevice is wrapped (with transport.ErrNotSupported) when no GPU is usable.
var ErrNoDevice = errors.New("no CUDA device")

// Open loads the CUDA runtime, driver, NVRTC and cuBLAS, compiles the training kernels
// for the GPU's architecture and creates a stream and a cuBLAS handle. Without a GPU
// or a library it returns an error wrapping transport.ErrNotSupported that says
// what is missing.
func Open(o Options) (*Device, error) {
	p := func(k string) string {
		if v := o.Params[k]; v != "" {
			return v
		}
		return o.Params[alias[k]]
	}
	d := &Device{}
	var err error
	if d.rt, err = cu.Load(p("cuda.lib")); err != nil {
		return nil, noDevice(err)
	}
	n, err := d.rt.DeviceCount()
	if err != nil {
		return nil, noDevice(err)
	}
	if n == 0 {
		return nil, noDevice(fmt.Errorf("the CUDA runtime sees 0 devices"))
	}
	ord := o.Ordinal
	if ord < 0 {
		ord = max(o.Rank, 0) % n
	}
	if d.dev, err = d.rt.Device(ord); err != nil {
		return nil, fmt.Errorf("dp/cuda: %w", err)
	}
	if d.drv, err = cu.LoadDriver(p("cuda.driver")); err != nil {
		return nil, noDevice(err)
	}
	if d.nv, err = nvrtc.Load(p("nvrtc.lib")); err != nil {
		return nil, fmt.Errorf("dp/cuda: device kernels need NVRTC: %w", err)
	}
	if d.bl, err = cublas.Load(p("cublas.lib")); err != nil {
		return nil, fmt.Errorf("dp/cuda: the model's matrix products need cuBLAS: %w", err)
	}
	if d.s, err = d.dev.NewStream(); err != nil {
		return nil, fmt.Errorf("dp/cuda: %w", err)
	}
	if d.k, err = kernels.Load(d.dev, d.drv, d.nv, kernels.Training); err != nil {
		d.s.Destroy()
		return nil, fmt.Errorf("dp/cuda: %w", err)
	}
	if d.h, err = d.bl.NewHandle(d.dev); err == nil {
		err = d.h.SetStream(d.s)
	}
	if err == nil {
		// fp32 products in fp32 (no TF32 tensor-core shortcut), as on the host.
		if e := d.h.SetMathMode(cublas.DefaultMath); e != nil && !errors.Is(e, transport.ErrNotSupported) {
			err = e
		}
	}
	if err == nil {
		d.flag, err = d.dev.Malloc(4)
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("dp/cuda: %w", err)
	}
	return d, nil
}

func noDevice(err error) error {
	if errors.Is(err, transport.ErrNotSupported) {
		return fmt.Errorf("dp/cuda: %w: %w: %w", transport.ErrNotSupported, ErrNoDevice, err)
	}
	return fmt.Errorf("dp/cuda: %w", err)
}

// Close releases the stream, handle and kernels. Buffers still allocated are the
// caller's to free first.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	if d.h != nil {
		errs = append(errs, d.h.Destroy())
	}
	if d.flag != 0 {
		errs = append(errs, d.dev.Free(d.flag))
	}
	if d.k != nil {
		errs = append(errs, d.k.Close())
	}
	if d.s != nil {
		errs = append(errs, d.s.Destroy())
	}
	return errors.Join(errs...)
}

// String is "cuda:N".
func (d *Device) String() string { return fmt.Sprintf("cuda:%d", d.dev.Ordinal()) }

// Ordinal is the CUDA device number.
func (d *Device) Ordinal() int { return d.dev.Ordinal() }

// Kernels is the compiled training kernel set (its Program says cubin or ptx).
func (d *Device) Kernels() *kernels.Set { return d.k }

// Live is the bytes this Device has allocated and not freed; Peak the most at once.
func (d *Device) Live() int64 { return d.live.Load() }
func (d *Device) Peak() int64 { return d.peak.Load() }

// MemInfo is the GPU's free and total memory.
func (d *Device) MemInfo() (free, total uint64, err error) { return d.dev.MemInfo() }

// sync waits for the stream. Calls without a context of their own get a minute:
// a kernel running longer than that has hung the GPU.
func (d *Device) sync(ctx context.Context) error {
	if ctx == nil {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ctx = c
	}
	if err := d.s.Synchronize(ctx); err != nil {
		return fmt.Errorf("dp/cuda: %s: %w", d, err)
	}
	return nil
}

func sizeOf(dt transport.DType) (int, error) {
	switch dt {
	case transport.Float32, transport.Float16, transport.BFloat16:
		return dt.Size(), nil
	}
	return 0, fmt.Errorf("dp/cuda: %w: dtype %s (valid: float32, float16, bfloat16)", transport.ErrInvalid, dt)
}

// Alloc returns n zeroed elements of dt in device memory.
func (d *Device) Alloc(dt transport.DType, n int) (transport.Buffer, error) {
	sz, err := sizeOf(dt)
	if err != nil {
		return transport.Buffer{}, err
	}
	if n < 0 {
		return transport.Buffer{}, fmt.Errorf("dp/cuda: %w: allocate %d elements (want >= 0)", transport.ErrInvalid, n)
	}
	bytes := n * sz
	if bytes == 0 {
		return d.dev.Buffer(0, 0), nil
	}
	p, err := d.dev.Malloc(bytes)
	if err != nil {
		return transport.Buffer{}, fmt.Errorf("dp/cuda: %s: %w", d, err)
	}
	if err := d.k.Zero(d.s, p, bytes); err == nil {
		err = d.sync(nil)
	}
	if err != nil {
		d.dev.Free(p)
		return transport.Buffer{}, err
	}
	l := d.live.Add(int64(bytes))
	for pk := d.peak.Load(); l > pk && !d.peak.CompareAndSwap(pk, l); pk = d.peak.Load() {
	}
	return d.dev.Buffer(p, bytes), nil
}

// Free releases a buffer from Alloc, after the stream's work that may still read it.
func (d *Device) Free(b transport.Buffer) {
	if b.Kind() != transport.Device || b.Ptr() == 0 {
		return
	}
	_ = d.sync(nil)
	if d.dev.Free(b.Ptr()) == nil {
		d.live.Add(-int64(b.Len()))
	}
}

func (d *Device) check(b transport.Buffer, dt transport.DType, n int, what string) error {
	sz, err := sizeOf(dt)
	if err != nil {
		return fmt.Errorf("dp/cuda: %s: %w", what, err)
	}
	if b.Kind() != transport.Device {
		return fmt.Errorf("dp/cuda: %w: %s a host buffer (this device handles %s memory)", transport.ErrInvalid, what, d)
	}
	if b.DeviceOrdinal() != d.dev.Ordinal() {
		return fmt.Errorf("dp/cuda: %w: %s a buffer of cuda:%d on %s", transport.ErrInvalid, what, b.DeviceOrdinal(), d)
	}
	if n < 0 || b.Len() < n*sz {
		return fmt.Errorf("dp/cuda: %w: %s %d %s elements, but the buffer holds %d bytes", transport.ErrInvalid, what, n, dt, b.Len())
	}
	return nil
}

// Upload copies host bytes into a device buffer.
func (d *Device) Upload(ctx context.Context, dst transport.Buffer, src []byte) error {
	if dst.Kind() != transport.Device || dst.Len() < len(src) {
		return fmt.Errorf("dp/cuda: %w: upload %d bytes into a %d-byte %s buffer", transport.ErrInvalid, len(src), dst.Len(), kind(dst))
	}
	if err := d.sync(ctx); err != nil { // earlier kernels may still read dst
		return err
	}
	if err := d.dev.CopyHtoD(dst.Ptr(), src); err != nil {
		return fmt.Errorf("dp/cuda: upload: %w", err)
	}
	// cudaMemcpy from pageable memory may return before the DMA lands; the device-wide
	// sync also orders it before work on this non-blocking stream.
	return d.dev.Synchronize()
}

// Download copies a device buffer into host bytes.
func (d *Device) Download(ctx context.Context, dst []byte, src transport.Buffer) error {
	if src.Kind() != transport.Device || src.Len() < len(dst) {
		return fmt.Errorf("dp/cuda: %w: download %d bytes from a %d-byte %s buffer", transport.ErrInvalid, len(dst), src.Len(), kind(src))
	}
	if err := d.sync(ctx); err != nil {
		return err
	}
	if err := d.dev.CopyDtoH(dst, src.Ptr()); err != nil {
		return fmt.Errorf("dp/cuda: download: %w", err)
	}
	return nil
}

func kind(b transport.Buffer) string {
	if b.Kind() == transport.Host {
		return "host"
	}
	return "device"
}

// Zero clears n elements.
func (d *Device) Zero(b transport.Buffer, dt transport.DType, n int) error {
	if err := d.check(b, dt, n, "zero"); err != nil {
		return err
	}
	if err := d.k.Zero(d.s, b.Ptr(), n*dt.Size()); err != nil {
		return err
	}
	return d.sync(nil)
}

// Cast converts (and optionally accumulates) on the device. A host operand (the
// host-side model's float32 scratch) is staged through a temporary device buffer.
func (d *Device) Cast(dst transport.Buffer, dt transport.DType, src transport.Buffer, st transport.DType, n int, scale float32, accumulate bool) error {
	if _, err := sizeOf(dt); err != nil {
		return fmt.Errorf("dp/cuda: cast into: %w", err)
	}
	if _, err := sizeOf(st); err != nil {
		return fmt.Errorf("dp/cuda: cast from: %w", err)
	}
	ctx := context.Background()
	if src.Kind() == transport.Host {
		if src.Len() < n*st.Size() {
			return fmt.Errorf("dp/cuda: %w: cast from %d %s elements, but the host buffer holds %d bytes", transport.ErrInvalid, n, st, src.Len())
		}
		tmp, err := d.Alloc(st, n)
		if err != nil {
			return err
		}
		defer d.Free(tmp)
		if err := d.Upload(ctx, tmp, src.Bytes()[:n*st.Size()]); err != nil {
			return err
		}
		src = tmp
	}
	if dst.Kind() == transport.Host {
		if dst.Len() < n*dt.Size() {
			return fmt.Errorf("dp/cuda: %w: cast into %d %s elements, but the host buffer holds %d bytes", transport.ErrInvalid, n, dt, dst.Len())
		}
		tmp, err := d.Alloc(dt, n)
		if err != nil {
			return err
		}
		defer d.Free(tmp)
		hd := dst.Bytes()[:n*dt.Size()]
		if accumulate {
			if err := d.Upload(ctx, tmp, hd); err != nil {
				return err
			}
		}
		if err := d.Cast(tmp, dt, src, st, n, scale, accumulate); err != nil {
			return err
		}
		return d.Download(ctx, hd, tmp)
	}
	if err := d.check(dst, dt, n, "cast into"); err != nil {
		return err
	}
	if err := d.check(src, st, n, "cast from"); err != nil {
		return err
	}
	if err := d.k.Cast(d.s, dst.Ptr(), dt, src.Ptr(), st, n, scale, accumulate); err != nil {
		return err
	}
	return d.sync(nil)
}

// NonFinite scans for Inf and NaN on the device and reads back one flag.
func (d *Device) NonFinite(b transport.Buffer, dt transport.DType, n int) (bool, error) {
	if err := d.check(b, dt, n, "scan"); err != nil {
		return false, err
	}
	if err := d.k.Zero(d.s, d.flag, 4); err != nil {
		return false, err
	}
	if err := d.k.NonFinite(d.s, b.Ptr(), dt, n, d.flag); err != nil {
		return false, err
	}
	var flag int32
	if err := d.Download(context.Background(), unsafe.Slice((*byte)(unsafe.Pointer(&flag)), 4), d.dev.Buffer(d.flag, 4)); err != nil {
		return false, err
	}
	return flag != 0, nil
}

// AdamW runs the fused update kernel: the bias corrections and the decay factor are
// computed here exactly as optim.AdamW.Step computes them, so device and host agree.
func (d *Device) AdamW(ctx context.Context, a *dp.AdamWArgs) error {
	n := a.N
	for _, c := range []struct {
		b  transport.Buffer
		dt transport.DType
		w  string
	}{{a.Master, transport.Float32, "master"}, {a.M, transport.Float32, "moment m"}, {a.V, transport.Float32, "moment v"}, {a.Grad, a.GradType, "gradient"}} {
		if err := d.check(c.b, c.dt, n, "AdamW "+c.w); err != nil {
			return err
		}
	}
	var param uintptr
	if a.Param.Len() > 0 {
		if err := d.check(a.Param, a.ParamType, n, "AdamW parameters"); err != nil {
			return err
		}
		param = a.Param.Ptr()
	}
	c1, c2 := a.Hyper.Corrections(a.Step)
	k := &kernels.AdamW{N: n, Master: a.Master.Ptr(), M: a.M.Ptr(), V: a.V.Ptr(), Grad: a.Grad.Ptr(), Param: param,
		GradType: a.GradType, ParamType: a.ParamType, GradScale: a.GradScale, LR: a.Hyper.LR, Beta1: a.Hyper.Beta1,
		Beta2: a.Hyper.Beta2, Eps: a.Hyper.Eps, Decay: 1 - a.Hyper.LR*a.Hyper.WeightDecay, C1: c1, C2: c2}
	if err := d.k.AdamW(d.s, k); err != nil {
		return fmt.Errorf("dp/cuda: %w", err)
	}
	return d.sync(ctx)
}

var _ dp.Device = (*Device)(nil)

// copyDtoD copies src into dst (same device) and waits for it: cudaMemcpy between
// device addresses may return before the copy ran.
func (d *Device) copyDtoD(dst, src transport.Buffer) error {
	if err := d.sync(nil); err != nil {
		return err
	}
	if err := d.dev.CopyDtoD(dst.Ptr(), src.Ptr(), min(dst.Len(), src.Len())); err != nil {
		return fmt.Errorf("dp/cuda: %w", err)
	}
	return d.dev.Synchronize()
}
