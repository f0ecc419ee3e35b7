package perf

import (
	"encoding/binary"
	"math"

	"github.com/goccl/goccl/transport"
)

// Check generates one rank's input for a correctness run and counts the wrong
// elements of its output. The inputs are chosen so that the exact result does not
// depend on the order in which an algorithm combines the ranks (nccl-tests'
// verifiable/ idea), so outputs are compared bit for bit:
//
//   - integer sum, prod, max, min: random bits (odd for prod, so products never
//     collapse to 0); wrap-around arithmetic is order-free.
//   - integer avg: values small enough that the sum cannot overflow; the expected
//     value is the sum divided by the rank count, truncated like NCCL.
//   - float sum: small integers, bounded so that every partial sum in any order is an
//     exact integer of the type (|sum| <= 256 for bfloat16, 2048 for half).
//   - float prod: one rank per element gives a mantissa m in [1, 2), the others +-2^e
//     with e in {-1, 0, 1} on a few ranks only, so products only move the exponent.
//   - float max, min: random integers (no -0, no NaN).
//   - float avg: two ranks per element give positive integers, the rest 0; the only
//     check with a tolerance (2 ULP), because dividing by n rounds.
//   - copies (broadcast, gathers, scatter, alltoall, sendrecv): random finite bit
//     patterns, unique per rank and index, so a misplaced chunk is caught.
type Check struct {
	Coll  *Collective
	DType transport.DType
	Op    transport.Op
	Root  int
	N     int // ranks
	Rank  int
	Seed  uint64
	K     Counts
}

// Checked reports whether this rank's receive buffer holds a result (only the root
// does for reduce and gather).
func (c *Check) Checked() bool {
	switch c.Coll.Kind {
	case transport.KindReduce, transport.KindGather:
		return c.Rank == c.Root
	}
	return true
}

// Fill writes this rank's input: K.Send elements.
func (c *Check) Fill(send []byte) {
	es := c.DType.Size()
	for i := int64(0); i < c.K.Send; i++ {
		c.put(send[i*int64(es):], c.input(c.Rank, i))
	}
}

// Verify counts the elements of recv (K.Recv elements) that differ from the expected
// result. It returns 0 on ranks whose output is not defined.
func (c *Check) Verify(recv []byte) int64 {
	if !c.Checked() {
		return 0
	}
	es := int64(c.DType.Size())
	tol := uint64(0)
	if c.reduces() && c.Op == transport.Avg && c.DType.IsFloat() {
		tol = 2
	}
	var wrong int64
	for k := int64(0); k < c.K.Recv; k++ {
		want := c.Expected(k)
		got := c.get(recv[k*es:])
		if got != want && (tol == 0 || ulpDistance(got, want, c.DType) > tol) {
			wrong++
		}
	}
	return wrong
}

func (c *Check) reduces() bool { return c.Coll.Reduces }

// Expected is the bit pattern element k of this rank's output must hold.
func (c *Check) Expected(k int64) uint64 {
	base := c.K.Param
	j := int64(c.Rank)
	n := int64(c.N)
	switch c.Coll.Kind {
	case transport.KindAllReduce, transport.KindReduce:
		return c.reduceAt(k)
	case transport.KindReduceScatter:
		return c.reduceAt(j*base + k)
	case transport.KindBroadcast:
		return c.input(c.Root, k)
	case transport.KindAllGather, transport.KindGather:
		return c.input(int(k/base), k%base)
	case transport.KindScatter:
		return c.input(c.Root, j*base+k)
	case transport.KindAllToAll:
		return c.input(int(k/base), j*base+k%base)
	case transport.KindSendRecv:
		return c.input(int((j-1+n)%n), k)
	}
	return 0
}

// hash is splitmix64 over (seed, rank, index): cheap, and different for every input.
func hash(seed uint64, rank int, i int64) uint64 {
	x := seed*0x9E3779B97F4A7C15 + uint64(rank+3)*0xD1B54A32D192ED03 + uint64(i)*0x94D049BB133111EB
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// exactInt is a bound below which every integer is exact in the float type.
func exactInt(d transport.DType) int64 {
	switch d {
	case transport.BFloat16:
		return 256
	case transport.Float16:
		return 2048
	case transport.Float32:
		return 1 << 24
	}
	return 1 << 40
}

// prodRanks is how many ranks per element may contribute 2^+-1 to a float product,
// so that no partial product in any order overflows half precision.
func prodRanks(d transport.DType) int {
	if d == transport.Float16 {
		return 6
	}
	return 30
}

// input is rank r's element i, as a bit pattern of the element width.
func (c *Check) input(r int, i int64) uint64 {
	h := hash(c.Seed, r, i)
	if !c.reduces() {
		return finite(h, c.DType)
	}
	n := int64(c.N)
	if !c.DType.IsFloat() {
		w := uint(8 * c.DType.Size())
		switch c.Op {
		case transport.Prod:
			return trunc(h|1, w)
		case transport.Avg:
			if signed(c.DType) {
				l := (int64(1)<<(w-1) - 1) / n
				return trunc(uint64(int64(h%uint64(2*l+1))-l), w)
			}
			l := trunc(math.MaxUint64, w) / uint64(n)
			if l == math.MaxUint64 {
				return h
			}
			return h % (l + 1)
		}
		return trunc(h, w)
	}
	e := exactInt(c.DType)
	var v float64
	switch c.Op {
	case transport.Sum:
		k := max(1, e/n)
		v = float64(int64(h%uint64(2*k+1)) - k)
	case transport.Max, transport.Min:
		v = float64(int64(h%uint64(2*e+1)) - e)
	case transport.Prod:
		special := int(hash(c.Seed, -1, i) % uint64(n))
		sign := 1.0
		if h>>40&1 == 1 {
			sign = -1
		}
		if r == special {
			v = sign * (1 + float64(h%8)/8)
		} else if slot := (r - special + c.N) % c.N; slot <= prodRanks(c.DType) {
			v = sign * math.Ldexp(1, int(h%3)-1)
		} else {
			v = sign
		}
	case transport.Avg:
		a := int(hash(c.Seed, -2, i) % uint64(n))
		if r == a || r == (a+1)%c.N {
			v = float64(1 + int64(h%uint64(max(1, e/4))))
		}
	}
	return floatBits(v, c.DType)
}

// reduceAt combines every rank's element i the exact way.
func (c *Check) reduceAt(i int64) uint64 {
	if !c.DType.IsFloat() {
		return c.reduceInt(i)
	}
	var acc float64
	for r := 0; r < c.N; r++ {
		v := bitsFloat(c.input(r, i), c.DType)
		switch {
		case r == 0:
			acc = v
		case c.Op == transport.Sum || c.Op == transport.Avg:
			acc += v
		case c.Op == transport.Prod:
			acc *= v
		case c.Op == transport.Max:
			acc = math.Max(acc, v)
		case c.Op == transport.Min:
			acc = math.Min(acc, v)
		}
	}
	if c.Op == transport.Avg {
		acc /= float64(c.N)
	}
	return floatBits(acc, c.DType)
}

func (c *Check) reduceInt(i int64) uint64 {
	w := uint(8 * c.DType.Size())
	sgn := signed(c.DType)
	var acc uint64
	for r := 0; r < c.N; r++ {
		v := c.input(r, i)
		if sgn {
			v = uint64(sext(v, w))
		}
		switch {
		case r == 0:
			acc = v
		case c.Op == transport.Sum || c.Op == transport.Avg:
			acc += v
		case c.Op == transport.Prod:
			acc *= v
		case c.Op == transport.Max:
			if (sgn && int64(v) > int64(acc)) || (!sgn && v > acc) {
				acc = v
			}
		case c.Op == transport.Min:
			if (sgn && int64(v) < int64(acc)) || (!sgn && v < acc) {
				acc = v
			}
		}
	}
	if c.Op == transport.Avg {
		if sgn {
			acc = uint64(int64(acc) / int64(c.N)) // Go, like C, truncates toward zero
		} else {
			acc /= uint64(c.N)
		}
	}
	return trunc(acc, w)
}

func signed(d transport.DType) bool {
	return d == transport.Int8 || d == transport.Int32 || d == transport.Int64
}

func trunc(v uint64, w uint) uint64 {
	if w >= 64 {
		return v
	}
	return v & (1<<w - 1)
}

func sext(v uint64, w uint) int64 {
	if w >= 64 {
		return int64(v)
	}
	s := 64 - w
	return int64(v<<s) >> s
}

// finite turns random bits into a pattern that is not Inf or NaN for float types.
func finite(h uint64, d transport.DType) uint64 {
	w := uint(8 * d.Size())
	h = trunc(h, w)
	var expMask, expTop uint64
	switch d {
	case transport.Float16:
		expMask, expTop = 0x7c00, 0x4000
	case transport.BFloat16:
		expMask, expTop = 0x7f80, 0x4000
	case transport.Float32:
		expMask, expTop = 0x7f800000, 0x40000000
	case transport.Float64:
		expMask, expTop = 0x7ff0000000000000, 0x4000000000000000
	default:
		return h
	}
	if h&expMask == expMask {
		h &^= expTop
	}
	return h
}

// floatBits converts v to the type's bit pattern, rounding to nearest even.
func floatBits(v float64, d transport.DType) uint64 {
	switch d {
	case transport.Float64:
		return math.Float64bits(v)
	case transport.Float32:
		return uint64(math.Float32bits(float32(v)))
	case transport.Float16:
		return uint64(f32ToF16(float32(v)))
	case transport.BFloat16:
		return uint64(f32ToBF16(float32(v)))
	}
	return 0
}

func bitsFloat(b uint64, d transport.DType) float64 {
	switch d {
	case transport.Float64:
		return math.Float64frombits(b)
	case transport.Float32:
		return float64(math.Float32frombits(uint32(b)))
	case transport.Float16:
		return float64(f16ToF32(uint16(b)))
	case transport.BFloat16:
		return float64(math.Float32frombits(uint32(b) << 16))
	}
	return 0
}

func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b >> 16 & 1)) >> 16)
}

func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case b>>23&0xff == 0xff:
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - exp)
		r := man + (1<<(shift-1) - 1) + (man >> shift & 1)
		return sign | uint16(r>>shift)
	}
	r := man + 0xfff + (man >> 13 & 1)
	if r&0x800000 != 0 {
		r = 0
		exp++
		if exp >= 0x1f {
			return sign | 0x7c00
		}
	}
	return sign | uint16(exp)<<10 | uint16(r>>13)
}

func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h >> 10 & 0x1f)
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		v := float32(man) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// ulpDistance is how many representable values lie between two float bit patterns.
func ulpDistance(a, b uint64, d transport.DType) uint64 {
	w := uint(8 * d.Size())
	ord := func(x uint64) int64 {
		sign := uint64(1) << (w - 1)
		if x&sign != 0 {
			return -int64(x &^ sign)
		}
		return int64(x)
	}
	diff := ord(a) - ord(b)
	if diff < 0 {
		diff = -diff
	}
	return uint64(diff)
}

func (c *Check) put(p []byte, v uint64) {
	switch c.DType.Size() {
	case 1:
		p[0] = byte(v)
	case 2:
		binary.NativeEndian.PutUint16(p, uint16(v))
	case 4:
		binary.NativeEndian.PutUint32(p, uint32(v))
	case 8:
		binary.NativeEndian.PutUint64(p, v)
	}
}

func (c *Check) get(p []byte) uint64 {
	switch c.DType.Size() {
	case 1:
		return uint64(p[0])
	case 2:
		return uint64(binary.NativeEndian.Uint16(p))
	case 4:
		return uint64(binary.NativeEndian.Uint32(p))
	case 8:
		return binary.NativeEndian.Uint64(p)
	}
	return 0
}
