package dp

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/goccl/goccl/transport"
)

// Host is the Device for host memory: buffers are Go slices, kernels are plain loops.
// It counts the bytes it has handed out, so tests and reports can check what an Engine
// really holds (Live, Peak).
type Host struct {
	live, peak atomic.Int64
}

// NewHost returns a host device.
func NewHost() *Host { return &Host{} }

// String is "host".
func (h *Host) String() string { return "host" }

// Live is the number of bytes allocated and not yet freed.
func (h *Host) Live() int64 { return h.live.Load() }

// Peak is the largest Live seen since the device was made (or ResetPeak).
func (h *Host) Peak() int64 { return h.peak.Load() }

// ResetPeak sets Peak to the current Live.
func (h *Host) ResetPeak() { h.peak.Store(h.live.Load()) }

// Alloc returns a zeroed buffer. The backing store is a []float32 or []uint16 so that
// typed views are aligned.
func (h *Host) Alloc(dt transport.DType, n int) (transport.Buffer, error) {
	if n < 0 {
		return transport.Buffer{}, fmt.Errorf("dp: host: %w: allocate %d elements (want >= 0)", transport.ErrInvalid, n)
	}
	var b []byte
	switch dt.Size() {
	case 4:
		b = asBytes(make([]float32, n))
	case 2:
		b = asBytes(make([]uint16, n))
	default:
		return transport.Buffer{}, fmt.Errorf("dp: host: %w: allocate %s (valid: float32, float16, bfloat16)", transport.ErrInvalid, dt)
	}
	l := h.live.Add(int64(len(b)))
	for p := h.peak.Load(); l > p && !h.peak.CompareAndSwap(p, l); p = h.peak.Load() {
	}
	return transport.HostBuffer(b), nil
}

// Free forgets the buffer (the garbage collector reclaims it).
func (h *Host) Free(b transport.Buffer) { h.live.Add(-int64(b.Len())) }

// Upload copies src into dst; Download below goes the other way.
func (h *Host) Upload(_ context.Context, dst transport.Buffer, src []byte) error {
	if dst.Kind() != transport.Host || dst.Len() < len(src) {
		return fmt.Errorf("dp: host: %w: upload %d bytes into a %d-byte %s buffer", transport.ErrInvalid, len(src), dst.Len(), kindName(dst))
	}
	copy(dst.Bytes(), src)
	return nil
}

// Download copies src into dst.
func (h *Host) Download(_ context.Context, dst []byte, src transport.Buffer) error {
	if src.Kind() != transport.Host || src.Len() < len(dst) {
		return fmt.Errorf("dp: host: %w: download %d bytes from a %d-byte %s buffer", transport.ErrInvalid, len(dst), src.Len(), kindName(src))
	}
	copy(dst, src.Bytes())
	return nil
}

// Zero clears n elements.
func (h *Host) Zero(b transport.Buffer, dt transport.DType, n int) error {
	bs, err := hostBytes(b, dt, n, "zero")
	if err != nil {
		return err
	}
	clear(bs)
	return nil
}

// Cast converts (and optionally accumulates) in chunks through a float32 scratch, so
// every pair of types runs the same two simple loops.
func (h *Host) Cast(dst transport.Buffer, dt transport.DType, src transport.Buffer, st transport.DType, n int, scale float32, accumulate bool) error {
	if _, err := hostBytes(dst, dt, n, "cast into"); err != nil {
		return err
	}
	if _, err := hostBytes(src, st, n, "cast from"); err != nil {
		return err
	}
	if dt == transport.Float32 && st == transport.Float32 {
		d, s := F32(dst)[:n], F32(src)[:n]
		if accumulate {
			for i, x := range s {
				d[i] += x * scale
			}
		} else if scale == 1 {
			copy(d, s)
		} else {
			for i, x := range s {
				d[i] = x * scale
			}
		}
		return nil
	}
	var tmp, acc [1024]float32
	for off := 0; off < n; off += len(tmp) {
		k := min(len(tmp), n-off)
		load(tmp[:k], src, st, off)
		if accumulate {
			load(acc[:k], dst, dt, off)
			for i := range k {
				tmp[i] = acc[i] + tmp[i]*scale
			}
		} else if scale != 1 {
			for i := range k {
				tmp[i] *= scale
			}
		}
		store(dst, dt, off, tmp[:k])
	}
	return nil
}

// NonFinite scans for Inf and NaN.
func (h *Host) NonFinite(b transport.Buffer, dt transport.DType, n int) (bool, error) {
	if _, err := hostBytes(b, dt, n, "scan"); err != nil {
		return false, err
	}
	switch dt {
	case transport.Float32:
		for _, x := range F32(b)[:n] {
			if math.Float32bits(x)&0x7f800000 == 0x7f800000 {
				return true, nil
			}
		}
	case transport.Float16:
		for _, x := range U16(b)[:n] {
			if x&0x7c00 == 0x7c00 {
				return true, nil
			}
		}
	case transport.BFloat16:
		for _, x := range U16(b)[:n] {
			if x&0x7f80 == 0x7f80 {
				return true, nil
			}
		}
	}
	return false, nil
}

// AdamW runs the fused update in chunks: widen the gradient, update master and moments
// with optim's kernel, round the new weights into the working parameters.
func (h *Host) AdamW(ctx context.Context, a *AdamWArgs) error {
	n := a.N
	for _, c := range []struct {
		b  transport.Buffer
		dt transport.DType
		w  string
	}{{a.Master, transport.Float32, "master"}, {a.M, transport.Float32, "moment m"}, {a.V, transport.Float32, "moment v"}, {a.Grad, a.GradType, "gradient"}} {
		if _, err := hostBytes(c.b, c.dt, n, "AdamW "+c.w); err != nil {
			return err
		}
	}
	aliased := a.Param.Len() == 0
	if !aliased {
		if _, err := hostBytes(a.Param, a.ParamType, n, "AdamW parameters"); err != nil {
			return err
		}
	}
	master, m, v := F32(a.Master)[:n], F32(a.M)[:n], F32(a.V)[:n]
	const chunk = 4096
	var g [chunk]float32
	for off := 0; off < n; off += chunk {
		if off%(1<<20) == 0 && ctx.Err() != nil {
			return fmt.Errorf("dp: host: AdamW: %w", ctx.Err())
		}
		k := min(chunk, n-off)
		var gs []float32
		if a.GradType == transport.Float32 {
			gs = F32(a.Grad)[off : off+k]
		} else {
			load(g[:k], a.Grad, a.GradType, off)
			gs = g[:k]
		}
		a.Hyper.Step(master[off:off+k], m[off:off+k], v[off:off+k], gs, a.GradScale, a.Step)
		if !aliased {
			store(a.Param, a.ParamType, off, master[off:off+k])
		}
	}
	return nil
}

// F32 views a host float32 buffer as a slice (nil for device or empty buffers).
func F32(b transport.Buffer) []float32 {
	bs := b.Bytes()
	if len(bs) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(bs))), len(bs)/4)
}

// U16 views a host 16-bit buffer (float16 or bfloat16 bit patterns) as a slice.
func U16(b transport.Buffer) []uint16 {
	bs := b.Bytes()
	if len(bs) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(bs))), len(bs)/2)
}

func asBytes[T float32 | uint16](xs []T) []byte {
	if len(xs) == 0 {
		return []byte{}
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), len(xs)*int(unsafe.Sizeof(z)))
}

func kindName(b transport.Buffer) string {
	if b.Kind() == transport.Host {
		return "host"
	}
	return "device"
}

func hostBytes(b transport.Buffer, dt transport.DType, n int, what string) ([]byte, error) {
	if err := workingType(dt); err != nil {
		return nil, fmt.Errorf("dp: host: %s: %w", what, err)
	}
	if b.Kind() != transport.Host {
		return nil, fmt.Errorf("dp: host: %w: %s a device buffer (the host device only handles host memory)", transport.ErrInvalid, what)
	}
	if n < 0 || b.Len() < n*dt.Size() {
		return nil, fmt.Errorf("dp: host: %w: %s %d %s elements, but the buffer holds %d bytes", transport.ErrInvalid, what, n, dt, b.Len())
	}
	return b.Bytes()[:n*dt.Size()], nil
}

// load widens len(dst) elements of b (type dt) starting at element off.
func load(dst []float32, b transport.Buffer, dt transport.DType, off int) {
	switch dt {
	case transport.Float32:
		copy(dst, F32(b)[off:])
	case transport.BFloat16:
		for i, x := range U16(b)[off : off+len(dst)] {
			dst[i] = fromBF16(x)
		}
	case transport.Float16:
		for i, x := range U16(b)[off : off+len(dst)] {
			dst[i] = fromF16(x)
		}
	}
}

// store rounds src into b (type dt) starting at element off.
func store(b transport.Buffer, dt transport.DType, off int, src []float32) {
	switch dt {
	case transport.Float32:
		copy(F32(b)[off:], src)
	case transport.BFloat16:
		d := U16(b)[off : off+len(src)]
		for i, x := range src {
			d[i] = toBF16(x)
		}
	case transport.Float16:
		d := U16(b)[off : off+len(src)]
		for i, x := range src {
			d[i] = toF16(x)
		}
	}
}

// HostFloat32s wraps a float32 slice as a host Buffer without copying.
func HostFloat32s(xs []float32) transport.Buffer { return transport.HostBuffer(asBytes(xs)) }
