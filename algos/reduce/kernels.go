package reduce

import (
	"math"
	"math/bits"
	"unsafe"

	"github.com/goccl/goccl/transport"
)

// number is every Go type a kernel runs on natively; float16 and bfloat16 travel as
// uint16 bit patterns and go through halfKernel instead.
type number interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// kernel3 computes d = a op b element-wise over len(d) elements (Avg accumulates as Sum).
// d may be the same memory as a or b: each element is read before it is written.
func kernel3[T number](op transport.Op, d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case transport.Sum, transport.Avg:
		sum3(d, a, b)
	case transport.Prod:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case transport.Max:
		// The builtin max propagates NaN and orders -0 below +0 (Go spec), so float
		// results do not depend on which rank's operand came first.
		for i := range d {
			d[i] = max(a[i], b[i])
		}
	case transport.Min:
		for i := range d {
			d[i] = min(a[i], b[i])
		}
	}
}

// sum3 is unrolled by four: Go does not vectorise it, but the unrolled body keeps four
// independent adds in flight, about 1.5x the plain loop on this machine (BenchmarkApply).
func sum3[T number](d, a, b []T) {
	n := len(d)
	a, b = a[:n], b[:n]
	i := 0
	for ; i+4 <= n; i += 4 {
		d0, d1, d2, d3 := a[i]+b[i], a[i+1]+b[i+1], a[i+2]+b[i+2], a[i+3]+b[i+3]
		d[i], d[i+1], d[i+2], d[i+3] = d0, d1, d2, d3
	}
	for ; i < n; i++ {
		d[i] = a[i] + b[i]
	}
}

// halfBlock is the elements per step of the float16/bfloat16 kernels: two float32
// staging arrays of this size live on the stack (4 KiB) and stay in L1.
const halfBlock = 512

// halfKernel reduces float16 (bf = false) or bfloat16 patterns: each block widens to
// float32 (exactly), combines there with the float32 kernel (AVX2 for sums), and rounds
// back once, to nearest even. Staging in blocks instead of converting element by
// element lets the widen and narrow loops inline their conversions. Sums do all three
// in registers where the CPU has the instructions (fastHalfSum), which leaves only a
// tail of under 8 elements to the blocks.
func halfKernel(op transport.Op, bf bool, d, a, b []uint16) {
	var fa, fb [halfBlock]float32
	a, b = a[:len(d)], b[:len(d)]
	if op == transport.Sum || op == transport.Avg {
		k := fastHalfSum(bf, d, a, b)
		d, a, b = d[k:], a[k:], b[k:]
	}
	for off := 0; off < len(d); off += halfBlock {
		n := min(halfBlock, len(d)-off)
		xa, xb := fa[:n], fb[:n]
		if bf {
			widenBF16(xa, a[off:off+n])
			widenBF16(xb, b[off:off+n])
		} else {
			widenF16(xa, a[off:off+n])
			widenF16(xb, b[off:off+n])
		}
		if !fast32(op, xa, xa, xb) {
			kernel3(op, xa, xa, xb)
		}
		if bf {
			narrowBF16(d[off:off+n], xa)
		} else {
			narrowF16(d[off:off+n], xa)
		}
	}
}

// widenF16 converts src to dst: F16C for the bulk where the CPU has it, the table for
// the rest.
func widenF16(dst []float32, src []uint16) {
	k := fastWiden(false, dst, src)
	t := f16Table
	for i, h := range src[k:len(dst)] {
		dst[k+i] = t[h]
	}
}

func widenBF16(dst []float32, src []uint16) {
	k := fastWiden(true, dst, src)
	for i, h := range src[k:len(dst)] {
		dst[k+i] = math.Float32frombits(uint32(h) << 16)
	}
}

// narrowF16 is Float32ToFloat16 with the common case inline: a result in the normal
// range, where rounding to nearest even is one add (a carry into the exponent, up to
// Inf, is still right). Subnormals, NaN and overflow call the full conversion.
func narrowF16(dst []uint16, src []float32) {
	k := fastNarrow(false, dst, src)
	dst, src = dst[k:], src[k:]
	for i, f := range src[:len(dst)] {
		bits := math.Float32bits(f)
		m := bits & 0x7fffffff
		if m-0x38800000 < 0x0f000000 { // biased float32 exponent 113..142
			h := m>>13 - 112<<10
			h += (m&0x1fff + 0x0fff + h&1) >> 13
			dst[i] = uint16(bits>>16)&0x8000 | uint16(h)
		} else {
			dst[i] = Float32ToFloat16(f)
		}
	}
}

// narrowBF16 is Float32ToBFloat16 inline.
func narrowBF16(dst []uint16, src []float32) {
	k := fastNarrow(true, dst, src)
	dst, src = dst[k:], src[k:]
	for i, f := range src[:len(dst)] {
		bits := math.Float32bits(f)
		if bits&0x7fffffff > 0x7f800000 {
			dst[i] = uint16(bits>>16) | 0x40
		} else {
			dst[i] = uint16((bits + 0x7fff + (bits>>16)&1) >> 16)
		}
	}
}

// divideSigned and divideUnsigned truncate toward zero, as C's integer division in
// NCCL's ncclAvg does, in 64 bits so a world size wider than T (300 ranks, int8) still
// works. A hardware division takes tens of cycles (int32 2 GB/s, uint8 0.5 GB/s), so
// they divide without one where they can: a power-of-two world shifts (a negative
// dividend first adds world-1, which makes the shift truncate toward zero), and values
// of at most 32 bits take the high half of a 64x64-bit product with m = 2^64/world
// rounded up. That quotient is exact: |x| m / 2^64 exceeds |x| / world by less than
// 2^-32, and the fraction of |x| / world is at most 1 - 1/world, so the floor is the
// same for any world below 2^32. 64-bit values over other worlds divide.
func divideSigned[T ~int8 | ~int32 | ~int64](d []T, world int) {
	w := int64(world)
	switch {
	case world == 1:
	case world&(world-1) == 0:
		k := uint(bits.TrailingZeros64(uint64(w)))
		for i := range d {
			x := int64(d[i])
			d[i] = T((x + (x>>63)&(w-1)) >> k)
		}
	case unsafe.Sizeof(T(0)) <= 4:
		m := ^uint64(0)/uint64(w) + 1
		for i := range d {
			x := int64(d[i])
			q, _ := bits.Mul64(uint64(max(x, -x)), m)
			if x < 0 {
				d[i] = T(-int64(q))
			} else {
				d[i] = T(q)
			}
		}
	default:
		for i := range d {
			d[i] = T(int64(d[i]) / w)
		}
	}
}

func divideUnsigned[T ~uint8 | ~uint32 | ~uint64](d []T, world int) {
	w := uint64(world)
	switch {
	case world == 1:
	case world&(world-1) == 0:
		k := uint(bits.TrailingZeros64(w))
		for i := range d {
			d[i] = T(uint64(d[i]) >> k)
		}
	case unsafe.Sizeof(T(0)) <= 4:
		m := ^uint64(0)/w + 1
		for i := range d {
			q, _ := bits.Mul64(uint64(d[i]), m)
			d[i] = T(q)
		}
	default:
		for i := range d {
			d[i] = T(uint64(d[i]) / w)
		}
	}
}

func divideFloat[T ~float32 | ~float64](d []T, world int) {
	w := T(world)
	for i := range d {
		d[i] /= w
	}
}

func divideHalf(d []uint16, bf bool, world int) {
	var f [halfBlock]float32
	for off := 0; off < len(d); off += halfBlock {
		n := min(halfBlock, len(d)-off)
		x := f[:n]
		if bf {
			widenBF16(x, d[off:off+n])
		} else {
			widenF16(x, d[off:off+n])
		}
		if !divide32(x, world) {
			divideFloat(x, world)
		}
		if bf {
			narrowBF16(d[off:off+n], x)
		} else {
			narrowF16(d[off:off+n], x)
		}
	}
}
