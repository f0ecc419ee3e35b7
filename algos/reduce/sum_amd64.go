package reduce

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/goccl/goccl/transport"
)

// useAVX2 selects the assembly sum kernels; tests flip it to compare them with the
// portable Go path on the same inputs.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func addF32AVX2(dst, a, b *float32, n int)

//go:noescape
func addF64AVX2(dst, a, b *float64, n int)

//go:noescape
func addF32NTAVX2(dst, a, b *float32, n int)

//go:noescape
func addF32NT2AVX2(d1, d2, a, b *float32, n int, s float32)

//go:noescape
func addF64NT2AVX2(d1, d2, a, b *float64, n int, s float64)

//go:noescape
func addF16F16C(d, a, b *uint16, n int)

//go:noescape
func addBF16AVX2(d, a, b *uint16, n int)

//go:noescape
func addF16NT2F16C(d1, d2, a, b *uint16, n int)

//go:noescape
func addBF16NT2AVX2(d1, d2, a, b *uint16, n int)

//go:noescape
func avgF16NT2F16C(d1, d2, a, b *uint16, n int, s float32)

//go:noescape
func avgBF16NT2AVX2(d1, d2, a, b *uint16, n int, s float32)

//go:noescape
func addI8AVX2(d, a, b *byte, n int)

//go:noescape
func addI32AVX2(d, a, b *byte, n int)

//go:noescape
func addI64AVX2(d, a, b *byte, n int)

//go:noescape
func mulI32AVX2(d, a, b *byte, n int)

//go:noescape
func mulI64AVX2(d, a, b *byte, n int)

//go:noescape
func mulI8AVX2(d, a, b *byte, n int)

//go:noescape
func mulF32AVX2(d, a, b *byte, n int)

//go:noescape
func mulF64AVX2(d, a, b *byte, n int)

//go:noescape
func maxI8AVX2(d, a, b *byte, n int)

//go:noescape
func minI8AVX2(d, a, b *byte, n int)

//go:noescape
func maxU8AVX2(d, a, b *byte, n int)

//go:noescape
func minU8AVX2(d, a, b *byte, n int)

//go:noescape
func maxI32AVX2(d, a, b *byte, n int)

//go:noescape
func minI32AVX2(d, a, b *byte, n int)

//go:noescape
func maxU32AVX2(d, a, b *byte, n int)

//go:noescape
func minU32AVX2(d, a, b *byte, n int)

//go:noescape
func maxI64AVX2(d, a, b *byte, n int)

//go:noescape
func minI64AVX2(d, a, b *byte, n int)

//go:noescape
func maxU64AVX2(d, a, b *byte, n int)

//go:noescape
func minU64AVX2(d, a, b *byte, n int)

//go:noescape
func divF32AVX2(d *float32, n int, w float32)

//go:noescape
func divF64AVX2(d *float64, n int, w float64)

//go:noescape
func maxF32AVX2(dst, a, b *float32, n int)

//go:noescape
func minF32AVX2(dst, a, b *float32, n int)

//go:noescape
func maxF64AVX2(dst, a, b *float64, n int)

//go:noescape
func minF64AVX2(dst, a, b *float64, n int)

// fast32 runs float32 Sum/Avg, Prod, Max and Min through AVX2 (8 lanes) and the tail
// through Go; it reports false when it did nothing, so the caller runs the generic
// kernel. The max/min kernels fix up VMAXPS's NaN and signed-zero rules to match Go's
// builtins (see minmax_amd64.s), so both paths give identical bits.
func fast32(op transport.Op, d, a, b []float32) bool {
	if !useAVX2 || len(d) < 8 {
		return false
	}
	n := len(d) &^ 7
	switch op {
	case transport.Sum, transport.Avg:
		addF32AVX2(&d[0], &a[0], &b[0], n)
	case transport.Prod:
		mulF32AVX2(bytesOf(d), bytesOf(a), bytesOf(b), 4*n)
	case transport.Max:
		maxF32AVX2(&d[0], &a[0], &b[0], n)
	case transport.Min:
		minF32AVX2(&d[0], &a[0], &b[0], n)
	default:
		return false
	}
	kernel3(op, d[n:], a[n:len(d)], b[n:len(d)])
	return true
}

// stream32 is fast32 for float32 Sum/Avg with non-temporal stores (see Apply3Stream):
// the elements before dst's first 32-byte boundary and after the last whole 128-byte
// block go through Go. It reports false when it did nothing.
func stream32(op transport.Op, d, a, b []float32) bool {
	if !useAVX2 || (op != transport.Sum && op != transport.Avg) || len(d) < 64 {
		return false
	}
	head := int((32-uintptr(unsafe.Pointer(&d[0]))%32)%32) / 4
	n := (len(d) - head) &^ 31
	kernel3(op, d[:head], a[:head], b[:head])
	addF32NTAVX2(&d[head], &a[head], &b[head], n)
	kernel3(op, d[head+n:], a[head+n:len(d)], b[head+n:len(d)])
	return true
}

// streamDual is stream32 with two outputs, d1 and d2 (Apply3Dual), for float32 or
// float64 sum and avg with kern, that width's two-output kernel; an average is
// finished for a world of world ranks, which must be a power of two (the kernel
// multiplies by 1/world, whose product has the quotient's bits). The elements before
// d1's first 32-byte boundary and after the last whole 128-byte block go through Go;
// d2 must then sit on a 32-byte boundary too, else it reports false having done
// nothing.
func streamDual[T float32 | float64](op transport.Op, world int, d1, d2, a, b []T, kern func(d1, d2, a, b *T, n int, s T)) bool {
	esz := int(unsafe.Sizeof(T(0)))
	if !useAVX2 || !scaled(op, world) || len(d1) < 256/esz {
		return false
	}
	p1, p2 := uintptr(unsafe.Pointer(&d1[0])), uintptr(unsafe.Pointer(&d2[0]))
	if (p1-p2)%32 != 0 {
		return false
	}
	scale := T(1)
	if op == transport.Avg {
		scale = 1 / T(world)
	}
	edge := func(d, x, y []T) { // an edge through Go: reduce, finish, copy
		kernel3(op, d, x, y)
		if op == transport.Avg {
			divideFloat(d, world)
		}
	}
	head := int((32-p1%32)%32) / esz
	n := (len(d1) - head) &^ (128/esz - 1)
	edge(d1[:head], a[:head], b[:head])
	copy(d2[:head], d1[:head])
	kern(&d1[head], &d2[head], &a[head], &b[head], n, scale)
	edge(d1[head+n:], a[head+n:len(d1)], b[head+n:len(d1)])
	copy(d2[head+n:], d1[head+n:])
	return true
}

// dual32 and dual64 are streamDual for each float width, the kernels that Apply3Dual
// runs for float32 and float64 (they report false where streamDual does).
func dual32(op transport.Op, world int, d1, d2, a, b []float32) bool {
	return streamDual(op, world, d1, d2, a, b, addF32NT2AVX2)
}

func dual64(op transport.Op, world int, d1, d2, a, b []float64) bool {
	return streamDual(op, world, d1, d2, a, b, addF64NT2AVX2)
}

// fast64 is fast32 for float64 (4 lanes).
func fast64(op transport.Op, d, a, b []float64) bool {
	if !useAVX2 || len(d) < 4 {
		return false
	}
	n := len(d) &^ 3
	switch op {
	case transport.Sum, transport.Avg:
		addF64AVX2(&d[0], &a[0], &b[0], n)
	case transport.Prod:
		mulF64AVX2(bytesOf(d), bytesOf(a), bytesOf(b), 8*n)
	case transport.Max:
		maxF64AVX2(&d[0], &a[0], &b[0], n)
	case transport.Min:
		minF64AVX2(&d[0], &a[0], &b[0], n)
	default:
		return false
	}
	kernel3(op, d[n:], a[n:len(d)], b[n:len(d)])
	return true
}

// bytesOf is s's first byte, for the kernels that count bytes.
func bytesOf[T any](s []T) *byte { return (*byte)(unsafe.Pointer(unsafe.SliceData(s))) }

// fastInt runs op on the whole 32-byte blocks of integers of dt and returns how many
// bytes it did: 0 without AVX2. Every op has a kernel for every width (averages sum;
// AVX2's missing byte and 64-bit multiplies and 64-bit max and min take a few
// instructions). The vector code gives Go's wrapping + and *, and its max and min, so
// the bits are kernel3's. Each kernel is called directly: a call through a func value
// would let the operands escape, and unaligned3's stack blocks with them.
func fastInt(dt transport.DType, op transport.Op, d, a, b []byte) int {
	n := len(d) &^ 31
	if !useAVX2 || n == 0 {
		return 0
	}
	pd, pa, pb := &d[0], &a[0], &b[0]
	switch op {
	case transport.Sum, transport.Avg:
		switch dt.Size() {
		case 1:
			addI8AVX2(pd, pa, pb, n)
		case 4:
			addI32AVX2(pd, pa, pb, n)
		case 8:
			addI64AVX2(pd, pa, pb, n)
		default:
			return 0
		}
	case transport.Prod:
		switch dt.Size() {
		case 1:
			mulI8AVX2(pd, pa, pb, n)
		case 4:
			mulI32AVX2(pd, pa, pb, n)
		case 8:
			mulI64AVX2(pd, pa, pb, n)
		default:
			return 0
		}
	case transport.Max:
		switch dt {
		case transport.Int8:
			maxI8AVX2(pd, pa, pb, n)
		case transport.Uint8:
			maxU8AVX2(pd, pa, pb, n)
		case transport.Int32:
			maxI32AVX2(pd, pa, pb, n)
		case transport.Uint32:
			maxU32AVX2(pd, pa, pb, n)
		case transport.Int64:
			maxI64AVX2(pd, pa, pb, n)
		case transport.Uint64:
			maxU64AVX2(pd, pa, pb, n)
		default:
			return 0
		}
	case transport.Min:
		switch dt {
		case transport.Int8:
			minI8AVX2(pd, pa, pb, n)
		case transport.Uint8:
			minU8AVX2(pd, pa, pb, n)
		case transport.Int32:
			minI32AVX2(pd, pa, pb, n)
		case transport.Uint32:
			minU32AVX2(pd, pa, pb, n)
		case transport.Int64:
			minI64AVX2(pd, pa, pb, n)
		case transport.Uint64:
			minU64AVX2(pd, pa, pb, n)
		default:
			return 0
		}
	default:
		return 0
	}
	return n
}

// divide32 and divide64 are divideFloat with the AVX2 kernels for the whole vectors
// and Go for the rest; they report false, having done nothing, without AVX2.
func divide32(d []float32, world int) bool { return divideVec(d, world, divF32AVX2) }

func divide64(d []float64, world int) bool { return divideVec(d, world, divF64AVX2) }

func divideVec[T float32 | float64](d []T, world int, kern func(d *T, n int, w T)) bool {
	if !useAVX2 {
		return false
	}
	n := len(d) &^ (32/int(unsafe.Sizeof(T(0))) - 1) // whole 32-byte vectors
	if n > 0 {
		kern(&d[0], n, T(world))
	}
	divideFloat(d[n:], world)
	return true
}

// useF16C selects the VCVTPH2PS/VCVTPS2PH float16 conversions (F16C, with AVX).
var useF16C = cpu.X86.HasF16C && cpu.X86.HasAVX

//go:noescape
func widenF16F16C(dst *float32, src *uint16, n int)

//go:noescape
func narrowF16F16C(dst *uint16, src *float32, n int)

//go:noescape
func widenBF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func narrowBF16AVX2(dst *uint16, src *float32, n int)

// fastWiden converts the first multiple of 8 elements of src into dst with the vector
// instructions and returns how many it did; the caller converts the rest.
func fastWiden(bf bool, dst []float32, src []uint16) int {
	n := len(dst) &^ 7
	switch {
	case n == 0:
		return 0
	case bf && useAVX2:
		widenBF16AVX2(&dst[0], &src[0], n)
	case !bf && useF16C:
		widenF16F16C(&dst[0], &src[0], n)
	default:
		return 0
	}
	return n
}

// fastHalfSum computes d = a + b for the whole 8-element blocks of float16 (bf false)
// or bfloat16 patterns in one pass (the bits of halfKernel's widen, add and narrow) and
// returns how many elements it did: 0 without F16C or AVX2.
func fastHalfSum(bf bool, d, a, b []uint16) int {
	n := len(d) &^ 7
	switch {
	case n == 0:
		return 0
	case bf && useAVX2:
		addBF16AVX2(&d[0], &a[0], &b[0], n)
	case !bf && useF16C:
		addF16F16C(&d[0], &a[0], &b[0], n)
	default:
		return 0
	}
	return n
}

// dualHalf is streamDual for float16 (bf false) and bfloat16 sums (addF16NT2F16C,
// addBF16NT2AVX2) and their averages over a power-of-two world (avgF16NT2F16C,
// avgBF16NT2AVX2: the sum rounded, then times 1/world and rounded again, Finish's
// bits): the elements before d1's first 16-byte boundary and after the last whole
// 8-element block go through halfKernel and Finish; d2 must sit as far from a 16-byte
// boundary as d1, else it reports false having done nothing, as it does for every other
// op and world and without F16C or AVX2.
func dualHalf(op transport.Op, bf bool, world int, d1, d2, a, b []uint16) bool {
	avg := op == transport.Avg
	if !scaled(op, world) || len(d1) < 32 || bf && !useAVX2 || !bf && !useF16C {
		return false
	}
	p1, p2 := uintptr(unsafe.Pointer(&d1[0])), uintptr(unsafe.Pointer(&d2[0]))
	if (p1-p2)%16 != 0 {
		return false
	}
	edge := func(d, x, y []uint16) { // an edge through Go: reduce, finish, copy
		halfKernel(op, bf, d, x, y)
		if avg {
			divideHalf(d, bf, world)
		}
	}
	head := int((16-p1%16)%16) / 2
	n := (len(d1) - head) &^ 7
	edge(d1[:head], a[:head], b[:head])
	copy(d2[:head], d1[:head])
	s := 1 / float32(world)
	switch {
	case bf && avg:
		avgBF16NT2AVX2(&d1[head], &d2[head], &a[head], &b[head], n, s)
	case bf:
		addBF16NT2AVX2(&d1[head], &d2[head], &a[head], &b[head], n)
	case avg:
		avgF16NT2F16C(&d1[head], &d2[head], &a[head], &b[head], n, s)
	default:
		addF16NT2F16C(&d1[head], &d2[head], &a[head], &b[head], n)
	}
	edge(d1[head+n:], a[head+n:len(d1)], b[head+n:len(d1)])
	copy(d2[head+n:], d1[head+n:])
	return true
}

// fastNarrow is fastWiden's inverse, rounding to nearest even.
func fastNarrow(bf bool, dst []uint16, src []float32) int {
	n := len(dst) &^ 7
	switch {
	case n == 0:
		return 0
	case bf && useAVX2:
		narrowBF16AVX2(&dst[0], &src[0], n)
	case !bf && useF16C:
		narrowF16F16C(&dst[0], &src[0], n)
	default:
		return 0
	}
	return n
}
