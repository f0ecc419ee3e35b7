package reduce

import (
	"fmt"
	"unsafe"

	"github.com/goccl/goccl/transport"
)

// Apply computes dst = dst op src element-wise. dst and src hold the same number of
// elements of dt in native byte order; they may start at any address.
func Apply(dt transport.DType, op transport.Op, dst, src []byte) error {
	return Apply3(dt, op, dst, dst, src)
}

// Apply3 computes dst = a op b element-wise. dst may be the same memory as a or b (each
// element is read before it is written); other overlaps give unspecified results. Avg
// combines like Sum: the division happens once, in Finish.
func Apply3(dt transport.DType, op transport.Op, dst, a, b []byte) error {
	if len(dst) <= tinyBytes && tinySum(dt, op, dst, a, b) {
		return nil
	}
	if err := check(dt, op, len(dst)); err != nil {
		return err
	}
	if len(a) != len(dst) || len(b) != len(dst) {
		return fmt.Errorf("reduce: %w: operands are %d, %d and %d bytes; all three must be equal",
			transport.ErrInvalid, len(dst), len(a), len(b))
	}
	if len(dst) == 0 {
		return nil
	}
	esz := dt.Size()
	if !aligned(dst, esz) || !aligned(a, esz) || !aligned(b, esz) {
		unaligned3(dt, op, dst, a, b)
		return nil
	}
	apply3(dt, op, dst, a, b)
	return nil
}

// Apply3Stream is Apply3 for an output that nobody reads again soon (a large result
// that other ranks copy later): where it can (float32 sum and avg, AVX2, dst not
// overlapping a or b) it stores with non-temporal writes, which skip reading dst's
// lines into the cache first, a third less memory traffic per element. dst may be a or
// b (in place) but must not partly overlap them. The results are identical to Apply3's.
func Apply3Stream(dt transport.DType, op transport.Op, dst, a, b []byte) error {
	if dt == transport.Float32 && len(dst) == len(a) && len(dst) == len(b) && len(dst) > 0 &&
		aligned(dst, 4) && aligned(a, 4) && aligned(b, 4) && apart(dst, a) && apart(dst, b) &&
		check(dt, op, len(dst)) == nil && stream32(op, view[float32](dst), view[float32](a), view[float32](b)) {
		return nil
	}
	return Apply3(dt, op, dst, a, b)
}

// Apply3Dual computes d1 = d2 = a op b element-wise, finished for a world of world ranks
// (Finish: an average divided by world): one pass that writes the result to two
// places, for a result that goes both into a message (d1, a link's own memory) and into
// the caller's buffer (d2), neither read again soon. Where it can (float32 and float64
// sum, and avg over a power-of-two world; float16 and bfloat16 likewise; see DualStreams;
// d1 and d2 equally aligned and apart from each other and from a and b, or d2 equal to
// a or b) both are written in one loop with non-temporal stores, as Apply3Stream does; otherwise it is Apply3 and Finish
// into d1 and a copy into d2. d1 must not overlap a or b, nor d2; d2 may be a or b (in
// place). The results are identical to Apply3's followed by Finish's, up to which NaN
// an element carries when both of its operands are NaNs: the vector kernels and Go's
// scalar code take different ones, and the two paths cut an array at different places.
func Apply3Dual(dt transport.DType, op transport.Op, world int, d1, d2, a, b []byte) error {
	if len(d2) != len(d1) {
		return fmt.Errorf("reduce: %w: the two outputs are %d and %d bytes; they must be equal", transport.ErrInvalid, len(d1), len(d2))
	}
	if err := check(dt, op, len(d1)); err != nil {
		return err
	}
	if len(a) != len(d1) || len(b) != len(d1) {
		return fmt.Errorf("reduce: %w: operands are %d, %d and %d bytes; all three must be equal",
			transport.ErrInvalid, len(d1), len(a), len(b))
	}
	if len(d1) > 0 && aligned(d1, dt.Size()) && aligned(d2, dt.Size()) && aligned(a, dt.Size()) && aligned(b, dt.Size()) &&
		apart(d1, a) && apart(d1, b) && apart(d1, d2) && (apart(d2, a) || same(d2, a)) && (apart(d2, b) || same(d2, b)) {
		switch {
		case dt == transport.Float32 && dual32(op, world, view[float32](d1), view[float32](d2), view[float32](a), view[float32](b)),
			dt == transport.Float64 && dual64(op, world, view[float64](d1), view[float64](d2), view[float64](a), view[float64](b)),
			(dt == transport.Float16 || dt == transport.BFloat16) &&
				dualHalf(op, dt == transport.BFloat16, world, view[uint16](d1), view[uint16](d2), view[uint16](a), view[uint16](b)):
			return nil
		}
	}
	if err := Apply3(dt, op, d1, a, b); err != nil {
		return err
	}
	if err := Finish(dt, op, d1, world); err != nil {
		return err
	}
	copy(d2, d1)
	return nil
}

// DualStreams reports whether Apply3Dual writes dt op results for a world of world
// ranks with non-temporal stores on this machine: sums, and averages over a
// power-of-two world, of float32 and float64 with AVX2, of float16 with F16C and of
// bfloat16 with AVX2 (outputs equally aligned).
func DualStreams(dt transport.DType, op transport.Op, world int) bool {
	if !scaled(op, world) {
		return false
	}
	switch dt {
	case transport.Float32, transport.Float64, transport.BFloat16:
		return useAVX2
	case transport.Float16:
		return useF16C
	}
	return false
}

// scaled reports whether op's result over world ranks is the sum times a power of two,
// 1 or 1/world, which the two-output kernels multiply by exactly: a sum, or an average
// over a power-of-two world.
func scaled(op transport.Op, world int) bool {
	return op == transport.Sum || op == transport.Avg && world >= 1 && world&(world-1) == 0
}

// same reports whether x and y are the same bytes.
func same(x, y []byte) bool {
	return len(x) == len(y) && (len(x) == 0 || unsafe.SliceData(x) == unsafe.SliceData(y))
}

// tinyBytes is the largest input tinySum takes.
const tinyBytes = 64

// tinySum is Apply3 for the float32 and float64 sums of a few values, a small
// AllReduce's: the loop without the checks and the dispatch around it, a quarter of
// the time at these sizes (an 8-byte Apply3 and Finish: 38 ns with them, 29 without).
// It reports false, having done nothing, for anything else (another dtype or op,
// operands of different lengths, a length that is not whole elements, an unaligned
// operand), which Apply3 then handles.
func tinySum(dt transport.DType, op transport.Op, dst, a, b []byte) bool {
	if op != transport.Sum && op != transport.Avg || len(a) != len(dst) || len(b) != len(dst) {
		return false
	}
	switch {
	case dt == transport.Float32 && len(dst)&3 == 0 && aligned(dst, 4) && aligned(a, 4) && aligned(b, 4):
		sum3(view[float32](dst), view[float32](a), view[float32](b))
	case dt == transport.Float64 && len(dst)&7 == 0 && aligned(dst, 8) && aligned(a, 8) && aligned(b, 8):
		sum3(view[float64](dst), view[float64](a), view[float64](b))
	default:
		return false
	}
	return true
}

// apart reports whether x and y are the same memory or share no byte: the kernels load
// each block of the inputs before they store the block, so only a partial overlap
// would read a result instead of an input.
func apart(x, y []byte) bool {
	xa, ya := uintptr(unsafe.Pointer(unsafe.SliceData(x))), uintptr(unsafe.Pointer(unsafe.SliceData(y)))
	return xa == ya || xa >= ya+uintptr(len(y)) || ya >= xa+uintptr(len(x))
}

// Finish applies the post-reduction step of op to buf: for Avg it divides every element
// by world (integers truncate toward zero, as NCCL's ncclAvg does; floats divide in their
// own precision, float16 and bfloat16 in float32 with one rounding); other ops need none.
func Finish(dt transport.DType, op transport.Op, buf []byte, world int) error {
	if err := check(dt, op, len(buf)); err != nil {
		return err
	}
	if op != transport.Avg || len(buf) == 0 {
		return nil
	}
	if world < 1 {
		return fmt.Errorf("reduce: %w: avg over a world of %d ranks; need at least 1", transport.ErrInvalid, world)
	}
	if !aligned(buf, dt.Size()) {
		// Rare (a caller's odd offset): divide an aligned copy and put it back.
		tmp := make([]uint64, (len(buf)+7)/8)
		tb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tmp))), len(buf))
		copy(tb, buf)
		finish(dt, tb, world)
		copy(buf, tb)
		return nil
	}
	finish(dt, buf, world)
	return nil
}

func finish(dt transport.DType, buf []byte, world int) {
	switch dt {
	case transport.Int8:
		divideSigned(view[int8](buf), world)
	case transport.Uint8:
		divideUnsigned(view[uint8](buf), world)
	case transport.Int32:
		divideSigned(view[int32](buf), world)
	case transport.Uint32:
		divideUnsigned(view[uint32](buf), world)
	case transport.Int64:
		divideSigned(view[int64](buf), world)
	case transport.Uint64:
		divideUnsigned(view[uint64](buf), world)
	case transport.Float16:
		divideHalf(view[uint16](buf), false, world)
	case transport.BFloat16:
		divideHalf(view[uint16](buf), true, world)
	case transport.Float32:
		if d := view[float32](buf); !divide32(d, world) {
			divideFloat(d, world)
		}
	case transport.Float64:
		if d := view[float64](buf); !divide64(d, world) {
			divideFloat(d, world)
		}
	}
}

func check(dt transport.DType, op transport.Op, n int) error {
	if !dt.Valid() {
		return fmt.Errorf("reduce: %w: unknown dtype %d (valid: int8, uint8, int32, uint32, int64, uint64, "+
			"float16, float32, float64, bfloat16)", transport.ErrInvalid, uint8(dt))
	}
	if !op.Valid() {
		return fmt.Errorf("reduce: %w: unknown op %d (valid: sum, prod, max, min, avg)", transport.ErrInvalid, uint8(op))
	}
	if n&(dt.Size()-1) != 0 { // sizes are powers of two
		return fmt.Errorf("reduce: %w: %d bytes is not a whole number of %d-byte %s elements",
			transport.ErrInvalid, n, dt.Size(), dt)
	}
	return nil
}

// apply3 dispatches on dtype; all three slices are aligned to the element size.
// Integers take the AVX2 kernels (fastInt) for their whole 32-byte blocks first.
func apply3(dt transport.DType, op transport.Op, dst, a, b []byte) {
	if !dt.IsFloat() {
		k := fastInt(dt, op, dst, a, b)
		dst, a, b = dst[k:], a[k:len(dst)], b[k:len(dst)]
	}
	switch dt {
	case transport.Int8:
		kernel3(op, view[int8](dst), view[int8](a), view[int8](b))
	case transport.Uint8:
		kernel3(op, dst, a, b)
	case transport.Int32:
		kernel3(op, view[int32](dst), view[int32](a), view[int32](b))
	case transport.Uint32:
		kernel3(op, view[uint32](dst), view[uint32](a), view[uint32](b))
	case transport.Int64:
		kernel3(op, view[int64](dst), view[int64](a), view[int64](b))
	case transport.Uint64:
		kernel3(op, view[uint64](dst), view[uint64](a), view[uint64](b))
	case transport.Float16:
		halfKernel(op, false, view[uint16](dst), view[uint16](a), view[uint16](b))
	case transport.BFloat16:
		halfKernel(op, true, view[uint16](dst), view[uint16](a), view[uint16](b))
	case transport.Float32:
		d, x, y := view[float32](dst), view[float32](a), view[float32](b)
		if !fast32(op, d, x, y) {
			kernel3(op, d, x, y)
		}
	case transport.Float64:
		d, x, y := view[float64](dst), view[float64](a), view[float64](b)
		if !fast64(op, d, x, y) {
			kernel3(op, d, x, y)
		}
	}
}

// view reinterprets b as a slice of T without copying. The caller guarantees alignment:
// amd64 would load unaligned words fine, but Go's checkptr (on under -race) rejects a
// misaligned conversion, so misaligned buffers take unaligned3 instead.
func view[T any](b []byte) []T {
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

// aligned reports whether b starts at a multiple of esz, a power of two (every dtype's
// size is): a mask, where a remainder would cost a division (tens of cycles) per operand.
func aligned(b []byte, esz int) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))&uintptr(esz-1) == 0
}

// unalignedBlock is the bytes per step of the misaligned path (a multiple of every
// element size); three such buffers live on the stack.
const unalignedBlock = 1024

// unaligned3 handles operands at addresses that are not multiples of the element size
// by staging blocks through aligned stack buffers and running the aligned kernels.
func unaligned3(dt transport.DType, op transport.Op, dst, a, b []byte) {
	var bd, ba, bb [unalignedBlock / 8]uint64
	td := unsafe.Slice((*byte)(unsafe.Pointer(&bd[0])), unalignedBlock)
	ta := unsafe.Slice((*byte)(unsafe.Pointer(&ba[0])), unalignedBlock)
	tb := unsafe.Slice((*byte)(unsafe.Pointer(&bb[0])), unalignedBlock)
	for off := 0; off < len(dst); off += unalignedBlock {
		n := min(unalignedBlock, len(dst)-off)
		copy(ta, a[off:off+n])
		copy(tb, b[off:off+n])
		apply3(dt, op, td[:n], ta[:n], tb[:n])
		copy(dst[off:off+n], td[:n])
	}
}
