package dp

import "math"

// The 16-bit conversions dp needs for working parameters, gradients and compressed
// gradients. They round to nearest even, like the collectives' own float16/bfloat16
// kernels, so a value cast here and one reduced there agree bit for bit.

// toBF16 rounds f to bfloat16 (the top 16 bits of a float32), keeping NaN a NaN.
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and non-zero
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// fromBF16 widens a bfloat16 bit pattern exactly.
func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// toF16 rounds f to IEEE binary16; values beyond its range become ±Inf, which is what
// fp16 loss scaling watches for.
func toF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp > 142: // >= 2^16 after rounding: overflow
		return sign | 0x7c00
	case exp >= 113: // normal half
		h := uint32(exp-112)<<10 | man>>13
		rest := man & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++ // may carry into the exponent, and up to Inf: both correct
		}
		return sign | uint16(h)
	case exp >= 102: // subnormal half
		m := man | 0x800000
		shift := uint32(126 - exp)
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	return sign // underflow to ±0
}

// fromF16 widens an IEEE binary16 bit pattern exactly.
func fromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: normalise
	e := uint32(113)
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}
