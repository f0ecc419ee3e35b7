package dp

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos/reduce"
)

// Every float16 bit pattern widens exactly and rounds back to itself, and dp's
// rounding agrees with the collectives' kernels (algos/reduce, written separately) on
// random values across the whole range, ties and overflow included.
func TestHalfConversions(t *testing.T) {
	for h := range 1 << 16 {
		f := fromF16(uint16(h))
		require.Equal(t, math.Float32bits(reduce.Float16ToFloat32(uint16(h))), math.Float32bits(f), "fp16 %#04x", h)
		if f != f { // NaN stays NaN
			require.True(t, fromF16(toF16(f)) != fromF16(toF16(f)))
			continue
		}
		require.Equal(t, uint16(h), toF16(f), "fp16 %#04x round trip", h)
		require.Equal(t, math.Float32bits(reduce.BFloat16ToFloat32(uint16(h))), math.Float32bits(fromBF16(uint16(h))))
		if bf := fromBF16(uint16(h)); bf == bf {
			require.Equal(t, uint16(h), toBF16(bf), "bf16 %#04x round trip", h)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []float32{0, -0.0, 1, 65504, 65519.99, 65520, 1e-8, 2.98e-8, 5.96e-8, 6.1e-5, float32(math.Inf(1)), 3e38}
	for i := range 200000 {
		var f float32
		if i < len(specials) {
			f = specials[i]
		} else {
			f = math.Float32frombits(rng.Uint32())
		}
		if f != f {
			continue
		}
		require.Equal(t, reduce.Float32ToFloat16(f), toF16(f), "fp16 of %g", f)
		require.Equal(t, reduce.Float32ToBFloat16(f), toBF16(f), "bf16 of %g", f)
	}
	// Round to nearest even, against float64 arithmetic: 1 + 2^-11 is a tie between 1
	// and 1 + 2^-10 in fp16 and goes to the even mantissa, 1.
	require.Equal(t, uint16(0x3c00), toF16(float32(1+math.Pow(2, -11))))
	require.Equal(t, uint16(0x3c02), toF16(float32(1+3*math.Pow(2, -11))))
	require.Equal(t, uint16(0x7c00), toF16(65520), "rounds up to Inf")
}
