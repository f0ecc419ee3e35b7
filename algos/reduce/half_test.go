package reduce

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// halfRef rounds float64 values to a 16-bit float format by brute force: it lists every
// finite non-negative pattern's value (in order, so patterns and values sort together),
// adds the value one ulp past the largest finite as a stand-in for Inf, and picks the
// nearest, ties to the even pattern. It shares no code with the conversions under test.
type halfRef struct {
	vals []float64 // vals[i] is the value of pattern i; the last entry stands for Inf
	inf  uint16
}

func newHalfRef(lastFinite uint16, inf uint16, value func(uint16) float64, pastMax float64) *halfRef {
	r := &halfRef{inf: inf}
	for h := uint16(0); h <= lastFinite; h++ {
		r.vals = append(r.vals, value(h))
	}
	r.vals = append(r.vals, pastMax)
	return r
}

func (r *halfRef) round(x float64) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	i := sort.SearchFloat64s(r.vals, x) // first value >= x
	switch {
	case i == len(r.vals):
		return sign | r.inf
	case r.vals[i] == x || i == 0:
		return sign | uint16(i)
	}
	lo, hi := r.vals[i-1], r.vals[i]
	pick := i
	if d1, d2 := x-lo, hi-x; d1 < d2 || (d1 == d2 && (i-1)%2 == 0) {
		pick = i - 1
	}
	return sign | uint16(pick)
}

// f16Value is the textbook binary16 formula, in float64.
func f16Value(h uint16) float64 {
	exp, mant := int(h>>10)&0x1f, float64(h&0x3ff)
	v := math.Ldexp(mant, -24)
	switch {
	case exp == 0x1f && mant != 0:
		return math.NaN()
	case exp == 0x1f:
		v = math.Inf(1)
	case exp != 0:
		v = math.Ldexp(1+mant/1024, exp-15)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// bf16Value is the bfloat16 formula (8 exponent bits, 7 mantissa bits), in float64.
func bf16Value(h uint16) float64 {
	exp, mant := int(h>>7)&0xff, float64(h&0x7f)
	v := math.Ldexp(mant, -133)
	switch {
	case exp == 0xff && mant != 0:
		return math.NaN()
	case exp == 0xff:
		v = math.Inf(1)
	case exp != 0:
		v = math.Ldexp(1+mant/128, exp-127)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

var (
	f16Ref  = newHalfRef(0x7bff, 0x7c00, f16Value, 65536)
	bf16Ref = newHalfRef(0x7f7f, 0x7f80, bf16Value, math.Ldexp(1, 128))
)

func TestFloat16ToFloat32Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := Float16ToFloat32(h)
		exp, mant := h>>10&0x1f, h&0x3ff
		switch {
		case exp == 0x1f && mant != 0:
			require.True(t, math.IsNaN(float64(got)), "pattern %#04x", h)
			require.Equal(t, uint32(mant)<<13, math.Float32bits(got)&0x7fffff, "NaN payload of %#04x", h)
		case exp == 0x1f:
			require.True(t, math.IsInf(float64(got), 0), "pattern %#04x", h)
			require.Equal(t, h&0x8000 != 0, math.Signbit(float64(got)))
		default:
			require.Equal(t, f16Value(h), float64(got), "pattern %#04x", h)
			require.Equal(t, h&0x8000 != 0, math.Signbit(float64(got)), "sign of %#04x", h)
			require.Equal(t, h, Float32ToFloat16(got), "round trip of %#04x", h)
		}
		require.Equal(t, math.Float32bits(got), math.Float32bits(f16Table[h]), "table entry %#04x", h)
	}
}

func TestBFloat16ToFloat32Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := BFloat16ToFloat32(h)
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			require.True(t, math.IsNaN(float64(got)), "pattern %#04x", h)
			continue
		}
		if h&0x7fff == 0x7f80 {
			require.True(t, math.IsInf(float64(got), 0))
			continue
		}
		require.Equal(t, bf16Value(h), float64(got), "pattern %#04x", h)
		require.Equal(t, h, Float32ToBFloat16(got), "round trip of %#04x", h)
	}
}

// halfInputs returns float32 values that stress rounding: every exact midpoint between
// consecutive half values (ties) and its float32 neighbours, plus random bit patterns.
func halfInputs(ref *halfRef, n int, rng *rand.Rand) []float32 {
	var xs []float32
	for i := 0; i+1 < len(ref.vals); i++ {
		mid := float32((ref.vals[i] + ref.vals[i+1]) / 2) // exact: one more bit than a half
		xs = append(xs, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))), -mid)
	}
	for range n {
		xs = append(xs, math.Float32frombits(rng.Uint32()))
	}
	return append(xs, 0, float32(math.Copysign(0, -1)), 65504, 65519.996, 65520, 1e-8, 3e-8, 5.960464477539063e-08,
		math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Inf(1)), float32(math.Inf(-1)))
}

func TestFloat32ToFloat16MatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, x := range halfInputs(f16Ref, 200000, rng) {
		got := Float32ToFloat16(x)
		if math.IsNaN(float64(x)) {
			require.Equal(t, uint16(0x7c00), got&0x7c00, "NaN %#08x must stay NaN", math.Float32bits(x))
			require.NotZero(t, got&0x3ff, "NaN %#08x must stay NaN", math.Float32bits(x))
			continue
		}
		require.Equal(t, f16Ref.round(float64(x)), got, "x=%g (%#08x)", x, math.Float32bits(x))
	}
}

func TestFloat32ToBFloat16MatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, x := range halfInputs(bf16Ref, 200000, rng) {
		got := Float32ToBFloat16(x)
		if math.IsNaN(float64(x)) {
			require.True(t, math.IsNaN(float64(BFloat16ToFloat32(got))), "NaN %#08x must stay NaN", math.Float32bits(x))
			continue
		}
		require.Equal(t, bf16Ref.round(float64(x)), got, "x=%g (%#08x)", x, math.Float32bits(x))
	}
}

func TestHalfNaNWithLowPayloadStaysNaN(t *testing.T) {
	// Payload only in the bits the narrow formats drop: a careless truncation gives Inf.
	for _, bits := range []uint32{0x7f800001, 0xff800001, 0x7fc00000, 0x7f801fff} {
		x := math.Float32frombits(bits)
		require.True(t, math.IsNaN(float64(Float16ToFloat32(Float32ToFloat16(x)))), "%#08x", bits)
		require.True(t, math.IsNaN(float64(BFloat16ToFloat32(Float32ToBFloat16(x)))), "%#08x", bits)
	}
}
