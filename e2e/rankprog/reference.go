package main

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/goccl/goccl"
)

// The inputs and the serial reference. Rank r's element i of call seed is a pure
// function of (seed, r, i), so every rank computes every other rank's input and the
// expected result without any communication.
//
// Values are chosen so that floats compare exactly (as in nccl-tests): integers in
// [-8, 8] for sums (partial sums of up to 8 ranks stay within 2^6, exact even in
// bfloat16's 8-bit significand, in any order), powers of two in {±0.5, ±1, ±2} for
// products, any representable value for max and min (the result is one of the inputs).
// Avg divides the exact sum once in the compute precision and rounds once more when a
// 16-bit type is stored, so it is allowed 2 units of the dtype's roundoff. Integer types
// use arbitrary bit patterns: wrap-around arithmetic is exact, and the reference wraps
// the same way (64-bit, masked to the width).

var ne = binary.NativeEndian

// mix is splitmix64: a cheap hash with good avalanche.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func hash(seed uint64, r, i int) uint64 {
	return mix(seed*0x100000001b3 ^ mix(uint64(r)<<40^uint64(i)))
}

// elem is one element as the reference sees it: integer bits zero-extended, or the exact
// value of a float element.
type elem struct {
	u uint64
	f float64
}

func mask(dt goccl.DType) uint64 {
	if dt.Size() == 8 {
		return math.MaxUint64
	}
	return 1<<(8*uint(dt.Size())) - 1
}

func signed(dt goccl.DType) bool {
	return dt == goccl.Int8 || dt == goccl.Int32 || dt == goccl.Int64
}

func sext(dt goccl.DType, v uint64) int64 {
	s := 64 - 8*uint(dt.Size())
	return int64(v<<s) >> s
}

// toBF16 rounds a float32 to bfloat16, to nearest with ties to even (inputs here are
// always representable, so this only matters for the output check of Avg).
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// round stores f in dt and reads it back.
func round(dt goccl.DType, f float64) float64 {
	switch dt {
	case goccl.BFloat16:
		return float64(fromBF16(toBF16(float32(f))))
	case goccl.Float32:
		return float64(float32(f))
	}
	return f
}

var prodValues = []float64{-2, -1, -0.5, 0.5, 1, 2}

// value is rank r's element i for a call of kind/op with the given seed.
func value(dt goccl.DType, op goccl.Op, reducing bool, seed uint64, r, i int) elem {
	h := hash(seed, r, i)
	if !dt.IsFloat() {
		return elem{u: h & mask(dt)}
	}
	var f float64
	switch {
	case !reducing:
		f = float64(int(h%255) - 127) // distinct enough to catch a misplaced block
	case op == goccl.Prod:
		f = prodValues[h%6]
	case op == goccl.Max || op == goccl.Min:
		f = (float64(h%20001) - 10000) / 64
	default:
		f = float64(int(h%17) - 8)
	}
	return elem{f: round(dt, f)}
}

func put(dt goccl.DType, b []byte, i int, e elem) {
	switch dt {
	case goccl.Int8, goccl.Uint8:
		b[i] = byte(e.u)
	case goccl.Int32, goccl.Uint32:
		ne.PutUint32(b[4*i:], uint32(e.u))
	case goccl.Int64, goccl.Uint64:
		ne.PutUint64(b[8*i:], e.u)
	case goccl.BFloat16:
		ne.PutUint16(b[2*i:], toBF16(float32(e.f)))
	case goccl.Float32:
		ne.PutUint32(b[4*i:], math.Float32bits(float32(e.f)))
	case goccl.Float64:
		ne.PutUint64(b[8*i:], math.Float64bits(e.f))
	default:
		panic(fmt.Sprintf("rankprog: dtype %s not handled", dt))
	}
}

func get(dt goccl.DType, b []byte, i int) elem {
	switch dt {
	case goccl.Int8, goccl.Uint8:
		return elem{u: uint64(b[i])}
	case goccl.Int32, goccl.Uint32:
		return elem{u: uint64(ne.Uint32(b[4*i:]))}
	case goccl.Int64, goccl.Uint64:
		return elem{u: ne.Uint64(b[8*i:])}
	case goccl.BFloat16:
		return elem{f: float64(fromBF16(ne.Uint16(b[2*i:])))}
	case goccl.Float32:
		return elem{f: float64(math.Float32frombits(ne.Uint32(b[4*i:])))}
	}
	return elem{f: math.Float64frombits(ne.Uint64(b[8*i:]))}
}

// combine reduces xs serially in rank order: float64 for floats, 64-bit wrapping
// arithmetic masked to the width for integers; Avg divides once at the end (integers
// truncate toward zero, as NCCL's ncclAvg does).
func combine(dt goccl.DType, op goccl.Op, xs []elem) elem {
	acc := xs[0]
	for _, x := range xs[1:] {
		if dt.IsFloat() {
			switch op {
			case goccl.Sum, goccl.Avg:
				acc.f += x.f
			case goccl.Prod:
				acc.f *= x.f
			case goccl.Max:
				acc.f = math.Max(acc.f, x.f)
			case goccl.Min:
				acc.f = math.Min(acc.f, x.f)
			}
			continue
		}
		switch op {
		case goccl.Sum, goccl.Avg:
			acc.u += x.u
		case goccl.Prod:
			acc.u *= x.u
		case goccl.Max, goccl.Min:
			less := acc.u < x.u
			if signed(dt) {
				less = sext(dt, acc.u) < sext(dt, x.u)
			}
			if less == (op == goccl.Max) {
				acc.u = x.u
			}
		}
		acc.u &= mask(dt)
	}
	if op == goccl.Avg {
		w := len(xs)
		switch {
		case dt.IsFloat():
			acc.f /= float64(w)
		case signed(dt):
			acc.u = uint64(sext(dt, acc.u)/int64(w)) & mask(dt)
		default:
			acc.u /= uint64(w)
		}
	}
	return acc
}

// roundoff is the unit roundoff 2^-p of the dtype's p-bit significand.
func roundoff(dt goccl.DType) float64 {
	switch dt {
	case goccl.BFloat16:
		return 0x1p-8
	case goccl.Float32:
		return 0x1p-24
	}
	return 0x1p-53
}

// same compares one output element with the reference (see the comment at the top for
// why only Avg gets a tolerance).
func same(dt goccl.DType, op goccl.Op, reducing bool, want, got elem) bool {
	if !dt.IsFloat() {
		return want.u == got.u
	}
	if math.IsNaN(got.f) {
		return false
	}
	tol := 0.0
	if reducing && op == goccl.Avg {
		tol = 2 * roundoff(dt) * math.Abs(want.f)
	}
	return math.Abs(got.f-want.f) <= tol
}
