package algostest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// Values says how inputs are drawn.
type Values int

const (
	// Exact draws inputs whose reduction is exact in every dtype, so floats compare
	// bit-for-bit like integers (nccl-tests' trick): integers in [-8, 8] for sums and
	// averages (partial sums of 8 ranks stay below 2^8, exact even in bfloat16), powers of
	// two in {±0.5, ±1, ±2} for products, any representable value for max and min.
	// Integer dtypes get random bit patterns (their wrap-around is exact).
	Exact Values = iota
	// Real draws floats uniformly from [-1, 1), rounded to the dtype; sums then round
	// and are checked against an error bound.
	Real
)

var ne = binary.NativeEndian

// elem is one element as the reference sees it: raw integer bits (zero-extended) or a
// float64 holding the exact value of a float element.
type elem struct {
	u uint64
	f float64
}

func signed(dt transport.DType) bool {
	return dt == transport.Int8 || dt == transport.Int32 || dt == transport.Int64
}

func widthMask(dt transport.DType) uint64 {
	if dt.Size() == 8 {
		return math.MaxUint64
	}
	return 1<<(8*uint(dt.Size())) - 1
}

func sext(dt transport.DType, v uint64) int64 {
	s := 64 - 8*uint(dt.Size())
	return int64(v<<s) >> s
}

// decode reads element i of b.
func decode(dt transport.DType, b []byte, i int) elem {
	switch dt {
	case transport.Int8, transport.Uint8:
		return elem{u: uint64(b[i])}
	case transport.Int32, transport.Uint32:
		return elem{u: uint64(ne.Uint32(b[4*i:]))}
	case transport.Int64, transport.Uint64:
		return elem{u: ne.Uint64(b[8*i:])}
	case transport.Float16:
		return elem{f: float64(reduce.Float16ToFloat32(ne.Uint16(b[2*i:])))}
	case transport.BFloat16:
		return elem{f: float64(reduce.BFloat16ToFloat32(ne.Uint16(b[2*i:])))}
	case transport.Float32:
		return elem{f: float64(math.Float32frombits(ne.Uint32(b[4*i:])))}
	}
	return elem{f: math.Float64frombits(ne.Uint64(b[8*i:]))}
}

// encode writes e as element i of b (floats are rounded to the dtype).
func encode(dt transport.DType, b []byte, i int, e elem) {
	switch dt {
	case transport.Int8, transport.Uint8:
		b[i] = byte(e.u)
	case transport.Int32, transport.Uint32:
		ne.PutUint32(b[4*i:], uint32(e.u))
	case transport.Int64, transport.Uint64:
		ne.PutUint64(b[8*i:], e.u)
	case transport.Float16:
		ne.PutUint16(b[2*i:], reduce.Float32ToFloat16(float32(e.f)))
	case transport.BFloat16:
		ne.PutUint16(b[2*i:], reduce.Float32ToBFloat16(float32(e.f)))
	case transport.Float32:
		ne.PutUint32(b[4*i:], math.Float32bits(float32(e.f)))
	default:
		ne.PutUint64(b[8*i:], math.Float64bits(e.f))
	}
}

// fill writes n random elements for op into b.
func fill(rng *rand.Rand, dt transport.DType, op transport.Op, v Values, b []byte) {
	n := len(b) / dt.Size()
	for i := range n {
		var e elem
		switch {
		case !dt.IsFloat():
			e.u = rng.Uint64() & widthMask(dt)
		case v == Real:
			e.f = rng.Float64()*2 - 1
		case op == transport.Prod:
			e.f = []float64{-2, -1, -0.5, 0.5, 1, 2}[rng.IntN(6)]
		case op == transport.Max || op == transport.Min:
			e.f = (rng.Float64()*2 - 1) * 100
		default:
			e.f = float64(rng.IntN(17) - 8)
		}
		encode(dt, b, i, e)
	}
}

// combine is the reference reduction of one element over the ranks' inputs, serially
// in rank order, in float64 for floats and in 64-bit wrapping arithmetic for integers.
func combine(dt transport.DType, op transport.Op, xs []elem, world int) elem {
	acc := xs[0]
	for _, x := range xs[1:] {
		if dt.IsFloat() {
			switch op {
			case transport.Sum, transport.Avg:
				acc.f += x.f
			case transport.Prod:
				acc.f *= x.f
			case transport.Max:
				acc.f = math.Max(acc.f, x.f)
			case transport.Min:
				acc.f = math.Min(acc.f, x.f)
			}
			continue
		}
		switch op {
		case transport.Sum, transport.Avg:
			acc.u += x.u
		case transport.Prod:
			acc.u *= x.u
		case transport.Max, transport.Min:
			less := acc.u < x.u
			if signed(dt) {
				less = sext(dt, acc.u) < sext(dt, x.u)
			}
			if less == (op == transport.Max) {
				acc.u = x.u
			}
		}
		acc.u &= widthMask(dt)
	}
	if op == transport.Avg {
		if dt.IsFloat() {
			acc.f /= float64(world)
		} else if signed(dt) {
			acc.u = uint64(sext(dt, acc.u)/int64(world)) & widthMask(dt) // truncates toward zero
		} else {
			acc.u /= uint64(world)
		}
	}
	return acc
}

// UnitRoundoff is 2^-p for the dtype's significand of p bits.
func UnitRoundoff(dt transport.DType) float64 {
	switch dt {
	case transport.Float16:
		return 0x1p-11
	case transport.BFloat16:
		return 0x1p-8
	case transport.Float32:
		return 0x1p-24
	}
	return 0x1p-53
}

// tolerance bounds |got - want| for one element.
//
//   - Exact inputs: sums, products, max and min are exact whatever the order (every
//     partial result is representable), so the bound is 0. Avg divides the exact sum
//     once in the compute precision (float32 for the 16-bit types) and, for float16 and
//     bfloat16, rounds again when stored: at most (u_compute + u_dtype) x |want|.
//   - Real inputs: each of the W-1 pairwise combinations, in whatever order the
//     algorithm applies them, rounds once in the compute precision and (16-bit types)
//     once more when stored, each time by at most (u_c + u_d) x |partial| <= (u_c + u_d) x
//     sum|x|; Avg's division adds one more such rounding. W x (u_c + u_d) x sum|x|
//     covers all of them.
func tolerance(dt transport.DType, op transport.Op, v Values, want float64, sumAbs float64, world int) float64 {
	u := UnitRoundoff(dt)
	uc := u
	if dt == transport.Float16 || dt == transport.BFloat16 {
		uc = 0x1p-24
	}
	if v == Exact {
		if op == transport.Avg {
			return (u + uc) * math.Abs(want)
		}
		return 0
	}
	if op == transport.Avg {
		sumAbs /= float64(world)
	}
	return float64(world) * (u + uc) * sumAbs
}

func rngFor(r int) *rand.Rand { return rand.New(rand.NewPCG(uint64(r), 77)) }
