package kernels_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/dp/optim"
	"github.com/goccl/goccl/nccl/kernels"
	"github.com/goccl/goccl/transport"
)

var sizes = []int{0, 1, 7, 1000, 4099}

func TestSourceIsDeterministicAndComplete(t *testing.T) {
	for _, g := range []kernels.Group{kernels.Training, kernels.Reductions} {
		src := kernels.Source(g)
		require.Equal(t, src, kernels.Source(g), "the source must not change between calls (it is the cache key)")
		device, _, ok := strings.Cut(src, "#ifdef GOCCL_HOST_SHIM")
		require.True(t, ok)
		require.NotContains(t, device, "#include", "device code must compile without CUDA headers")
		ks := kernels.Kernels(g)
		seen := map[string]bool{}
		for _, k := range ks {
			require.False(t, seen[k.Name], "duplicate kernel %s", k.Name)
			seen[k.Name] = true
			require.Equal(t, 1, strings.Count(device, `extern "C" __global__ void `+k.Name+"("), k.Name)
			require.Contains(t, src, k.Name+"__host(", k.Name)
		}
		decl := regexp.MustCompile(`extern "C" __global__ void (\w+)\(`).FindAllStringSubmatch(device, -1)
		require.Len(t, decl, len(ks), "every kernel in the source is listed, and no other")
	}
	require.Len(t, kernels.Kernels(kernels.Reductions), 10*4+10, "4 ops and avg for each of the 10 dtypes")
	require.Equal(t, "goccl_cast_bf16_f32", kernels.CastName(transport.Float32, transport.BFloat16))
	require.Equal(t, "goccl_reduce_sum_f16", kernels.ReduceName(transport.Float16, transport.Sum))
}

func randF32(r *rand.Rand, n int, scale float64) []float32 {
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(r.NormFloat64() * scale)
	}
	return xs
}

func f32bits(xs []float32) []uint32 {
	out := make([]uint32, len(xs))
	for i, x := range xs {
		out[i] = math.Float32bits(x)
	}
	return out
}

// toHalf rounds float32s to dt's bit patterns with algos/reduce's conversions, the
// independent reference for the kernels' own.
func toHalf(dt transport.DType, xs []float32) []uint16 {
	out := make([]uint16, len(xs))
	for i, x := range xs {
		if dt == transport.BFloat16 {
			out[i] = reduce.Float32ToBFloat16(x)
		} else {
			out[i] = reduce.Float32ToFloat16(x)
		}
	}
	return out
}

func fromHalf(dt transport.DType, hs []uint16) []float32 {
	out := make([]float32, len(hs))
	for i, h := range hs {
		if dt == transport.BFloat16 {
			out[i] = reduce.BFloat16ToFloat32(h)
		} else {
			out[i] = reduce.Float16ToFloat32(h)
		}
	}
	return out
}

// TestAdamWMatchesHost runs the fused kernel for every gradient and parameter type and
// compares master weights, moments and rounded parameters with optim.AdamW.Step on
// the same inputs, bit for bit, over several steps.
func TestAdamWMatchesHost(t *testing.T) {
	e := newEnv(t, 1)
	r := rand.New(rand.NewPCG(1, 2))
	hp := optim.AdamW{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1}
	for _, n := range sizes {
		for _, gt := range kernels.WorkingTypes {
			for _, pt := range []transport.DType{0, transport.Float16, transport.BFloat16} {
				master := randF32(r, n, 1)
				m, v := make([]float32, n), make([]float32, n)
				dm, dmm, dv := upload(e, master), upload(e, m), upload(e, v)
				var dparam uintptr
				if pt != 0 {
					dparam = upload(e, make([]uint16, n))
				}
				for step := 1; step <= 3; step++ {
					g := randF32(r, n, 0.01)
					var dg uintptr
					if gt == transport.Float32 {
						dg = upload(e, g)
					} else {
						h := toHalf(gt, g)
						dg = upload(e, h)
						g = fromHalf(gt, h)
					}
					c1, c2 := hp.Corrections(step)
					const gscale = 0.5
					require.NoError(t, e.train.AdamW(e.s, &kernels.AdamW{N: n, Master: dm, M: dmm, V: dv, Grad: dg, Param: dparam,
						GradType: gt, ParamType: pt, GradScale: gscale, LR: hp.LR, Beta1: hp.Beta1, Beta2: hp.Beta2, Eps: hp.Eps,
						Decay: 1 - hp.LR*hp.WeightDecay, C1: c1, C2: c2}))
					hp.Step(master, m, v, g, gscale, step)
				}
				require.Equal(t, f32bits(master), f32bits(download[float32](e, dm, n)), "master n=%d grad %s param %v", n, gt, pt)
				require.Equal(t, f32bits(m), f32bits(download[float32](e, dmm, n)), "m n=%d", n)
				require.Equal(t, f32bits(v), f32bits(download[float32](e, dv, n)), "v n=%d", n)
				if pt != 0 {
					require.Equal(t, toHalf(pt, master), download[uint16](e, dparam, n), "param n=%d %s", n, pt)
				}
			}
		}
	}
}

// hostBuf holds n elements of dt on the host, for dp.Host's reference casts.
func hostBuf(dt transport.DType, vals []float32) transport.Buffer {
	if dt == transport.Float32 {
		return dp.HostFloat32s(append([]float32(nil), vals...))
	}
	h := toHalf(dt, vals)
	return transport.HostBuffer(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h))), 2*len(h)))
}

func TestCastsMatchHostDevice(t *testing.T) {
	e := newEnv(t, 0)
	r := rand.New(rand.NewPCG(3, 4))
	host := dp.NewHost()
	for _, n := range sizes {
		for _, st := range kernels.WorkingTypes {
			for _, dt := range kernels.WorkingTypes {
				for _, c := range []struct {
					scale float32
					acc   bool
				}{{1, false}, {0.25, false}, {-3, true}} {
					src, dst := randF32(r, n, 100), randF32(r, n, 100)
					src = append(src[:0:0], src...)
					if n > 3 {
						src[0], src[1], src[2] = 1e6, 70000, float32(math.Inf(1)) // fp16 overflow, Inf
					}
					hs, hd := hostBuf(st, src), hostBuf(dt, dst)
					ds, dd := upload(e, hs.Bytes()), upload(e, hd.Bytes())
					require.NoError(t, host.Cast(hd, dt, hs, st, n, c.scale, c.acc))
					require.NoError(t, e.train.Cast(e.s, dd, dt, ds, st, n, c.scale, c.acc))
					require.Equal(t, hd.Bytes(), download[byte](e, dd, hd.Len()), "cast %s->%s n=%d scale %v acc %v", st, dt, n, c.scale, c.acc)
				}
			}
		}
	}
	require.ErrorIs(t, e.train.Cast(e.s, 0, transport.Int32, 0, transport.Float32, 4, 1, false), transport.ErrInvalid)
}

func TestNonFiniteAndScaleCheck(t *testing.T) {
	e := newEnv(t, 0)
	for _, dt := range kernels.WorkingTypes {
		for _, c := range []struct {
			vals []float32
			want int32
		}{{[]float32{}, 0}, {[]float32{1, -2, 65000}, 0}, {[]float32{1, float32(math.Inf(-1))}, 1},
			{[]float32{float32(math.NaN()), 0, 3}, 1}} {
			b := hostBuf(dt, c.vals)
			p := upload(e, b.Bytes())
			flag := upload(e, []int32{0})
			require.NoError(t, e.train.NonFinite(e.s, p, dt, len(c.vals), flag))
			require.Equal(t, []int32{c.want}, download[int32](e, flag, 1), "%s %v", dt, c.vals)
			flag2 := upload(e, []int32{0})
			require.NoError(t, e.train.ScaleCheck(e.s, p, dt, len(c.vals), 0.5, flag2))
			require.Equal(t, []int32{c.want}, download[int32](e, flag2, 1), "scale check %s %v", dt, c.vals)
			want := hostBuf(dt, c.vals)
			require.NoError(t, dp.NewHost().Cast(want, dt, hostBuf(dt, c.vals), dt, len(c.vals), 0.5, false))
			requireSameOrNaN(t, dt, want.Bytes(), download[byte](e, p, want.Len()), "scaled %s", dt)
		}
	}
}

// requireSameOrNaN checks got against want bit for bit, except that where want holds a
// NaN got need only hold a NaN: a GPU returns its canonical NaN (0x7fffffff in float32)
// from arithmetic on a NaN, where the host's SSE keeps the operand's payload (0x7fc00000).
// IEEE 754 leaves the payload open, so both are right.
func requireSameOrNaN(t *testing.T, dt transport.DType, want, got []byte, msg string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want), append([]any{msg}, args...)...)
	sz := dt.Size()
	for i := 0; i < len(want); i += sz {
		if isNaN(dt, want[i:i+sz]) && isNaN(dt, got[i:i+sz]) {
			continue
		}
		require.Equal(t, want[i:i+sz], got[i:i+sz], append([]any{"element %d: " + msg, i / sz}, args...)...)
	}
}

// isNaN reports whether one element of a float dtype is a NaN (exponent all ones, a
// non-zero fraction); integers never are.
func isNaN(dt transport.DType, b []byte) bool {
	switch dt {
	case transport.Float16:
		v := binary.LittleEndian.Uint16(b)
		return v&0x7c00 == 0x7c00 && v&0x3ff != 0
	case transport.BFloat16:
		v := binary.LittleEndian.Uint16(b)
		return v&0x7f80 == 0x7f80 && v&0x7f != 0
	case transport.Float32:
		return math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
	case transport.Float64:
		return math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return false
}

// randBytes fills n elements of dt with values from a small range (so products stay
// finite) including negative zeros for floats.
func randBytes(r *rand.Rand, dt transport.DType, n int) []byte {
	b := make([]byte, n*dt.Size())
	for i := range n {
		x := float64(r.IntN(19) - 9)
		if r.IntN(5) == 0 {
			x += r.Float64()
		}
		if r.IntN(11) == 0 {
			x = math.Copysign(0, -1)
		}
		o := b[i*dt.Size():]
		switch dt {
		case transport.Int8, transport.Uint8:
			o[0] = byte(int8(x))
		case transport.Int32, transport.Uint32:
			*(*int32)(unsafe.Pointer(&o[0])) = int32(x) * 1000003
		case transport.Int64, transport.Uint64:
			*(*int64)(unsafe.Pointer(&o[0])) = int64(x) * 1000000000007
		case transport.Float16:
			*(*uint16)(unsafe.Pointer(&o[0])) = reduce.Float32ToFloat16(float32(x))
		case transport.BFloat16:
			*(*uint16)(unsafe.Pointer(&o[0])) = reduce.Float32ToBFloat16(float32(x))
		case transport.Float32:
			*(*float32)(unsafe.Pointer(&o[0])) = float32(x)
		case transport.Float64:
			*(*float64)(unsafe.Pointer(&o[0])) = x
		}
	}
	return b
}

// TestReductionsMatchAlgos checks every dtype x op (and Avg's finish, for several world
// sizes) against algos/reduce, the host kernels the algorithms use, bit for bit.
func TestReductionsMatchAlgos(t *testing.T) {
	e := newEnv(t, 1)
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range kernels.AllTypes {
		for _, op := range append(kernels.ReduceOps, transport.Avg) {
			for _, n := range []int{0, 1, 13, 1001} {
				a, b := randBytes(r, dt, n), randBytes(r, dt, n)
				da, db := upload(e, a), upload(e, b)
				dd := upload(e, make([]byte, len(a)))
				want := make([]byte, len(a))
				require.NoError(t, reduce.Apply3(dt, op, want, a, b))
				require.NoError(t, e.reduce.Reduce(e.s, dt, op, dd, da, db, n))
				if op == transport.Avg {
					w := 1 + n%5
					require.NoError(t, reduce.Finish(dt, op, want, w))
					require.NoError(t, e.reduce.Avg(e.s, dt, dd, n, w))
				}
				require.Equal(t, want, download[byte](e, dd, len(a)), "%s %s n=%d", dt, op, n)
			}
		}
	}
	require.ErrorIs(t, e.reduce.Avg(e.s, transport.Float32, 0, 4, 0), transport.ErrInvalid)
	require.ErrorContains(t, e.train.Reduce(e.s, transport.Float32, transport.Sum, 0, 0, 0, 4), "reductions group")
}
