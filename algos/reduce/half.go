package reduce

import "math"

// Float16ToFloat32 converts an IEEE 754 binary16 bit pattern to float32. Every binary16
// value, subnormals included, is exactly representable in float32, so this never rounds;
// NaN payloads are kept (shifted into the high mantissa bits).
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: mant x 2^-24, exact in float32 (a normal number there).
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+(127-15))<<23 | mant<<13)
}

// Float32ToFloat16 converts f to the nearest binary16 value, ties to even, as IEEE 754
// and F16C's VCVTPS2PH (imm 0) do: values beyond the largest finite half (65504) plus
// half an ulp become Inf, tiny values become subnormals or signed zero, and a NaN stays a
// NaN (quieted, keeping the top payload bits).
func Float32ToFloat16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23) & 0xff
	mant := bits & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7c00 | 0x200 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // the biased binary16 exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal (or zero) result: the unit is 2^-24, so shift the 24-bit significand
		// right by 14-e and round the dropped bits to nearest even.
		if e < -10 {
			return sign // below half the smallest subnormal: rounds to zero
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++ // may carry into the smallest normal, whose bits are exactly h
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry out of the mantissa bumps the exponent, up to Inf (0x7c00)
	}
	return sign | uint16(h)
}

// BFloat16ToFloat32 converts a bfloat16 bit pattern to float32 (exact: bfloat16 is the
// top half of a float32).
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBFloat16 converts f to the nearest bfloat16, ties to even; overflow rounds to
// Inf, subnormals round like any other value, and a NaN stays a NaN (quiet bit set, so a
// payload held only in the dropped bits cannot turn it into Inf).
func Float32ToBFloat16(f float32) uint16 {
	bits := math.Float32bits(f)
	if bits&0x7fffffff > 0x7f800000 {
		return uint16(bits>>16) | 0x40
	}
	bits += 0x7fff + (bits>>16)&1
	return uint16(bits >> 16)
}

// f16Table maps every binary16 pattern to its float32 value: a 256 KiB table is faster
// than the branchy conversion in the reduce loops and stays in L2.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = Float16ToFloat32(uint16(i))
	}
	return &t
}()
