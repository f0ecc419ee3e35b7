package reduce

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

// TestVectorConversionsMatchScalar compares the F16C/AVX2 conversions with the scalar
// ones: every 16-bit pattern widened, and tie-heavy plus random float32 values narrowed,
// at lengths that leave scalar tails.
func TestVectorConversionsMatchScalar(t *testing.T) {
	if !useF16C || !useAVX2 {
		t.Skip("reduce: no F16C/AVX2 on this CPU; only the scalar conversions run here")
	}
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	wide := make([]float32, len(all))
	for _, bf := range []bool{false, true} {
		require.Equal(t, len(all), fastWiden(bf, wide, all))
		for i, h := range all {
			want := Float16ToFloat32(h)
			if bf {
				want = BFloat16ToFloat32(h)
			}
			if math.IsNaN(float64(want)) {
				// VCVTPH2PS quiets a signalling NaN; either way it stays a NaN.
				require.True(t, math.IsNaN(float64(wide[i])), "bf=%v %#04x", bf, h)
				continue
			}
			require.Equal(t, math.Float32bits(want), math.Float32bits(wide[i]), "bf=%v widen %#04x", bf, h)
		}
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for _, bf := range []bool{false, true} {
		ref := f16Ref
		if bf {
			ref = bf16Ref
		}
		xs := halfInputs(ref, 100000, rng)
		for _, n := range []int{len(xs), 13, 8, 7} {
			got := make([]uint16, n)
			k := fastNarrow(bf, got, xs[:n])
			require.Equal(t, n&^7, k)
			for i, x := range xs[:k] {
				want := Float32ToFloat16(x)
				if bf {
					want = Float32ToBFloat16(x)
				}
				require.Equal(t, want, got[i], "bf=%v narrow %g (%#08x)", bf, x, math.Float32bits(x))
			}
		}
	}
}

// TestHalfKernelPathsAgree runs the float16/bfloat16 kernels with the vector
// conversions on and off over random data, odd lengths and every op.
func TestHalfKernelPathsAgree(t *testing.T) {
	if !useF16C || !useAVX2 {
		t.Skip("reduce: no F16C/AVX2 on this CPU")
	}
	defer func() { useF16C, useAVX2 = true, true }()
	rng := rand.New(rand.NewPCG(23, 24))
	for _, dt := range []uint8{6, 9} { // Float16, BFloat16
		for op := uint8(0); op < 5; op++ {
			for _, n := range []int{1, 7, 8, 9, 100, 513, 1500} {
				d := dtypeOf(dt)
				a, b := randomBytes(rng, d, n), randomBytes(rng, d, n)
				slow, fast := make([]byte, len(a)), make([]byte, len(a))
				useF16C, useAVX2 = false, false
				require.NoError(t, Apply3(d, opOf(op), slow, a, b))
				useF16C, useAVX2 = true, true
				require.NoError(t, Apply3(d, opOf(op), fast, a, b))
				requireSameResult(t, d, slow, fast, d.String()+" "+opOf(op).String()+" vector vs scalar")
			}
		}
	}
}

func dtypeOf(d uint8) transport.DType { return transport.DType(d) }
func opOf(o uint8) transport.Op       { return transport.Op(o) }

// TestDualHalfEveryPattern runs the two-output 16-bit kernels, and the one-output sum
// kernels beside them, over every bit pattern
// against each of several rotations of them, for sums and for averages over 2 and 4
// ranks, and holds both outputs to Go's scalar path (halfKernel with the vector
// conversions off, then Finish's divideHalf) bit for bit wherever at most one operand
// is a NaN; where both are, any NaN will do (the vector and scalar adds keep
// different ones). Averages round twice, as Apply3 and Finish do: a kernel that
// scaled the unrounded sum fails here.
func TestDualHalfEveryPattern(t *testing.T) {
	if !useF16C || !useAVX2 {
		t.Skip("reduce: no F16C/AVX2 on this CPU")
	}
	defer func() { useF16C, useAVX2 = true, true }()
	const n = 1 << 16
	a := make([]uint16, n)
	for i := range a {
		a[i] = uint16(i)
	}
	for _, bf := range []bool{false, true} {
		dt := transport.Float16
		if bf {
			dt = transport.BFloat16
		}
		nan := func(h uint16) bool { return isNaN16(dt, h) }
		for _, rot := range []int{1, 257, 32768, 40961} {
			b := append(append([]uint16(nil), a[rot:]...), a[:rot]...)
			for _, o := range []struct {
				op    transport.Op
				world int
			}{{transport.Sum, 2}, {transport.Avg, 2}, {transport.Avg, 4}} {
				useF16C, useAVX2 = false, false
				want := make([]uint16, n)
				halfKernel(o.op, bf, want, a, b)
				if o.op == transport.Avg {
					divideHalf(want, bf, o.world)
				}
				useF16C, useAVX2 = true, true
				d1, d2, one := make([]uint16, n), make([]uint16, n), make([]uint16, n)
				require.True(t, dualHalf(o.op, bf, o.world, d1, d2, a, b))
				halfKernel(o.op, bf, one, a, b) // the one-output sum kernel (fastHalfSum)
				if o.op == transport.Avg {
					divideHalf(one, bf, o.world)
				}
				for i := range want {
					if nan(a[i]) && nan(b[i]) {
						require.True(t, nan(d1[i]) && nan(d2[i]) && nan(one[i]), "%s %+v: %#04x, %#04x", dt, o, a[i], b[i])
						continue
					}
					if want[i] != d1[i] || want[i] != d2[i] || want[i] != one[i] {
						t.Fatalf("%s %+v: a=%#04x b=%#04x: want %#04x, got %#04x and %#04x (one output: %#04x)",
							dt, o, a[i], b[i], want[i], d1[i], d2[i], one[i])
					}
				}
			}
		}
	}
}
