package reduce

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

// The reference below decodes every element with encoding/binary and computes in
// float64, math/big or 64-bit integers, sharing nothing with the kernels but the
// (separately brute-force-tested) half conversions' reference rounding.

var ne = binary.NativeEndian

func isSigned(dt transport.DType) bool {
	return dt == transport.Int8 || dt == transport.Int32 || dt == transport.Int64
}

// rawInt reads element i as zero-extended bits.
func rawInt(dt transport.DType, b []byte, i int) uint64 {
	switch dt.Size() {
	case 1:
		return uint64(b[i])
	case 4:
		return uint64(ne.Uint32(b[4*i:]))
	}
	return ne.Uint64(b[8*i:])
}

func signExtend(dt transport.DType, v uint64) int64 {
	s := 64 - 8*uint(dt.Size())
	return int64(v<<s) >> s
}

func mask(dt transport.DType) uint64 {
	if dt.Size() == 8 {
		return math.MaxUint64
	}
	return 1<<(8*uint(dt.Size())) - 1
}

// floatAt reads element i of a float dtype as float64 (exact for every format).
func floatAt(dt transport.DType, b []byte, i int) float64 {
	switch dt {
	case transport.Float16:
		return f16Value(ne.Uint16(b[2*i:]))
	case transport.BFloat16:
		return bf16Value(ne.Uint16(b[2*i:]))
	case transport.Float32:
		return float64(math.Float32frombits(ne.Uint32(b[4*i:])))
	}
	return math.Float64frombits(ne.Uint64(b[8*i:]))
}

func isNaN16(dt transport.DType, h uint16) bool {
	if dt == transport.Float16 {
		return h&0x7c00 == 0x7c00 && h&0x3ff != 0
	}
	return h&0x7f80 == 0x7f80 && h&0x7f != 0
}

// refFloatOp is a op b in exact arithmetic rounded once to the kernel's compute format:
// float64 for float64 (math/big, correctly rounded), float32 for the rest.
func refFloatOp(dt transport.DType, op transport.Op, a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	switch op {
	case transport.Max:
		if a == b { // +0 wins over -0
			return pick(a, b, !math.Signbit(a))
		}
		return pick(a, b, a > b)
	case transport.Min:
		if a == b {
			return pick(a, b, math.Signbit(a))
		}
		return pick(a, b, a < b)
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		if op == transport.Prod {
			return a * b
		}
		return a + b
	}
	if dt != transport.Float64 {
		// float64 holds the exact product of two float32 values and the double rounding
		// of a sum is innocuous (53 >= 2x24+2), so one conversion gives the correctly
		// rounded float32 result, subnormals and overflow included.
		if op == transport.Prod {
			return float64(float32(a * b))
		}
		return float64(float32(a + b))
	}
	x, y := new(big.Float).SetFloat64(a), new(big.Float).SetFloat64(b)
	z := new(big.Float).SetPrec(53).SetMode(big.ToNearestEven)
	if op == transport.Prod {
		z.Mul(x, y)
	} else {
		z.Add(x, y)
	}
	f, _ := z.Float64()
	return f
}

func pick(a, b float64, first bool) float64 {
	if first {
		return a
	}
	return b
}

// refApply3 returns the expected bytes of a op b.
func refApply3(dt transport.DType, op transport.Op, a, b []byte) []byte {
	n := len(a) / dt.Size()
	out := make([]byte, len(a))
	for i := range n {
		if !dt.IsFloat() {
			x, y := rawInt(dt, a, i), rawInt(dt, b, i)
			var r uint64
			switch op {
			case transport.Sum, transport.Avg:
				r = x + y
			case transport.Prod:
				r = x * y
			case transport.Max, transport.Min:
				less := x < y
				if isSigned(dt) {
					less = signExtend(dt, x) < signExtend(dt, y)
				}
				r = pick2(x, y, less == (op == transport.Min))
			}
			putRaw(dt, out, i, r&mask(dt))
			continue
		}
		r := refFloatOp(dt, op, floatAt(dt, a, i), floatAt(dt, b, i))
		putFloat(dt, out, i, r)
	}
	return out
}

func pick2(x, y uint64, first bool) uint64 {
	if first {
		return x
	}
	return y
}

func putRaw(dt transport.DType, b []byte, i int, v uint64) {
	switch dt.Size() {
	case 1:
		b[i] = byte(v)
	case 4:
		ne.PutUint32(b[4*i:], uint32(v))
	default:
		ne.PutUint64(b[8*i:], v)
	}
}

// putFloat stores v (already rounded to float32 precision for the narrow types) in dt,
// rounding to the half formats with the brute-force reference.
func putFloat(dt transport.DType, b []byte, i int, v float64) {
	switch dt {
	case transport.Float16, transport.BFloat16:
		ref := f16Ref
		if dt == transport.BFloat16 {
			ref = bf16Ref
		}
		if math.IsNaN(v) {
			ne.PutUint16(b[2*i:], 0x7fff)
			return
		}
		ne.PutUint16(b[2*i:], ref.round(v))
	case transport.Float32:
		ne.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	default:
		ne.PutUint64(b[8*i:], math.Float64bits(v))
	}
}

// sameResult compares element-wise; any NaN matches any NaN, everything else bit-exact.
func requireSameResult(t *testing.T, dt transport.DType, want, got []byte, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	es := dt.Size()
	n := len(want) / es
	// A plain loop, and require only on a mismatch: require per element (its Helper
	// stack walk and boxed arguments) took three quarters of this package's test time.
	for i := range n {
		w, g := want[i*es:(i+1)*es], got[i*es:(i+1)*es]
		if dt.IsFloat() {
			wf, gf := floatAt(dt, want, i), floatAt(dt, got, i)
			if math.IsNaN(wf) || math.IsNaN(gf) {
				if !math.IsNaN(wf) || !math.IsNaN(gf) {
					require.Failf(t, "NaN mismatch", "%s: element %d: want %v got %v", msg, i, wf, gf)
				}
				continue
			}
		}
		if !bytes.Equal(w, g) {
			require.Equal(t, w, g, "%s: element %d of %d", msg, i, n)
		}
	}
}

// randomBytes fills n elements of dt: random bit patterns for integers, and for floats a
// mix of ordinary values, specials (NaN, ±Inf, ±0, subnormals) and random patterns.
func randomBytes(rng *rand.Rand, dt transport.DType, n int) []byte {
	b := make([]byte, n*dt.Size())
	for i := range n {
		if !dt.IsFloat() {
			putRaw(dt, b, i, rng.Uint64()&mask(dt))
			continue
		}
		var v float64
		switch r := rng.IntN(20); {
		case r == 0:
			v = math.NaN()
		case r == 1:
			v = math.Inf(1 - 2*rng.IntN(2))
		case r == 2:
			v = math.Copysign(0, float64(1-2*rng.IntN(2)))
		case r == 3:
			v = math.Ldexp(float64(rng.IntN(4)+1), -140+rng.IntN(20)) // tiny: subnormal somewhere
		default:
			v = (rng.Float64()*2 - 1) * math.Ldexp(1, rng.IntN(20)-10)
		}
		switch dt {
		case transport.Float16, transport.BFloat16:
			putFloat(dt, b, i, float64(float32(v)))
		default:
			putFloat(dt, b, i, v)
		}
	}
	return b
}

var lengths = []int{0, 1, 3, 7, 8, 9, 31, 32, 33, 100, 257, 1031}

func TestApply3AllDTypesOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dt := range transport.DTypes {
		for _, op := range transport.Ops {
			for _, n := range lengths {
				a, b := randomBytes(rng, dt, n), randomBytes(rng, dt, n)
				want := refApply3(dt, op, a, b)
				got := make([]byte, len(a))
				require.NoError(t, Apply3(dt, op, got, a, b))
				requireSameResult(t, dt, want, got, dt.String()+" "+op.String())

				// dst aliasing either operand, through Apply and Apply3.
				d := append([]byte(nil), a...)
				require.NoError(t, Apply(dt, op, d, b))
				requireSameResult(t, dt, want, d, dt.String()+" "+op.String()+" Apply")
				d = append([]byte(nil), b...)
				require.NoError(t, Apply3(dt, op, d, a, d))
				requireSameResult(t, dt, want, d, dt.String()+" "+op.String()+" dst=b")
			}
		}
	}
}

func TestApply3Misaligned(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dt := range transport.DTypes {
		for _, op := range transport.Ops {
			for _, n := range []int{1, 9, 300, 700} { // 700 x 8 bytes spans several staging blocks
				for off := range 8 {
					nb := n * dt.Size()
					a, b := randomBytes(rng, dt, n), randomBytes(rng, dt, n)
					want := refApply3(dt, op, a, b)
					// Place each operand at a different offset inside a larger buffer.
					ba := make([]byte, nb+16)[off : off+nb]
					bb := make([]byte, nb+16)[(off+3)%8 : (off+3)%8+nb]
					bd := make([]byte, nb+16)[(off+5)%8 : (off+5)%8+nb]
					copy(ba, a)
					copy(bb, b)
					require.NoError(t, Apply3(dt, op, bd, ba, bb))
					requireSameResult(t, dt, want, bd, dt.String()+" "+op.String()+" misaligned")
				}
			}
		}
	}
}

func TestFinish(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, dt := range transport.DTypes {
		for _, world := range []int{1, 2, 3, 4, 7, 64, 300, 1<<20 + 1} {
			for _, off := range []int{0, 1} {
				for _, n := range []int{0, 1, 7, 61, 1029} { // 1029: the float kernels' whole blocks and a tail
					src := randomBytes(rng, dt, n)
					buf := make([]byte, len(src)+1)[off : off+len(src)]
					copy(buf, src)
					require.NoError(t, Finish(dt, transport.Avg, buf, world))
					want := make([]byte, len(src))
					for i := range n {
						if !dt.IsFloat() {
							x := new(big.Int)
							if isSigned(dt) {
								x.SetInt64(signExtend(dt, rawInt(dt, src, i)))
							} else {
								x.SetUint64(rawInt(dt, src, i))
							}
							x.Quo(x, big.NewInt(int64(world))) // Quo truncates toward zero
							putRaw(dt, want, i, uint64(x.Int64())&mask(dt))
							if !isSigned(dt) {
								putRaw(dt, want, i, x.Uint64()&mask(dt))
							}
							continue
						}
						v := floatAt(dt, src, i) / float64(world)
						if dt != transport.Float64 {
							v = float64(float32(v)) // the kernel divides in float32
						}
						putFloat(dt, want, i, v)
					}
					requireSameResult(t, dt, want, buf, dt.String()+" avg finish")

					// Every other op leaves the buffer alone.
					for _, op := range []transport.Op{transport.Sum, transport.Prod, transport.Max, transport.Min} {
						c := bytes.Clone(src)
						require.NoError(t, Finish(dt, op, c, world))
						require.Equal(t, src, c)
					}
				}
			}
		}
	}
}

// TestFinishIntegerExtremes divides each integer dtype's extremes and their neighbours
// by worlds that take each of Finish's integer paths (a shift for powers of two, a
// multiply by a rounded-up reciprocal for values of at most 32 bits, a division for 64
// bits otherwise), against math/big's truncating quotient.
func TestFinishIntegerExtremes(t *testing.T) {
	for _, dt := range []transport.DType{transport.Int8, transport.Uint8, transport.Int32, transport.Uint32,
		transport.Int64, transport.Uint64} {
		bits := 8 * dt.Size()
		var vals []*big.Int
		lo, hi := big.NewInt(0), new(big.Int).Lsh(big.NewInt(1), uint(bits)) // unsigned: [0, 2^bits)
		if isSigned(dt) {
			lo = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), uint(bits-1)))
			hi = new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
		}
		for _, base := range []*big.Int{lo, hi, big.NewInt(0)} {
			for delta := int64(-3); delta <= 3; delta++ {
				v := new(big.Int).Add(base, big.NewInt(delta))
				if v.Cmp(lo) >= 0 && v.Cmp(hi) < 0 {
					vals = append(vals, v)
				}
			}
		}
		for _, world := range []int{2, 3, 4, 5, 7, 64, 255, 256, 300, 65537, 1<<31 - 1, 1 << 31, 1<<32 - 5} {
			buf := make([]byte, len(vals)*dt.Size())
			for i, v := range vals {
				putRaw(dt, buf, i, new(big.Int).And(v, new(big.Int).SetUint64(mask(dt))).Uint64())
			}
			require.NoError(t, Finish(dt, transport.Avg, buf, world))
			for i, v := range vals {
				q := new(big.Int).Quo(v, big.NewInt(int64(world))) // truncates toward zero
				want := new(big.Int).And(q, new(big.Int).SetUint64(mask(dt))).Uint64()
				require.Equal(t, want, rawInt(dt, buf, i), "%s: %v / %d", dt, v, world)
			}
		}
	}
}

func TestAVX2MatchesGeneric(t *testing.T) {
	if !useAVX2 {
		t.Skip("reduce: this CPU has no AVX2; only the generic path runs here")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	defer func() { useAVX2 = true }()
	for _, dt := range []transport.DType{transport.Float32, transport.Float64, transport.Int8, transport.Uint8,
		transport.Int32, transport.Uint32, transport.Int64, transport.Uint64} {
		for _, op := range transport.Ops {
			for n := 0; n < 300; n += 1 + n/8 {
				a, b := randomBytes(rng, dt, n), randomBytes(rng, dt, n)
				slow, fast := make([]byte, len(a)), make([]byte, len(a))
				useAVX2 = false
				require.NoError(t, Apply3(dt, op, slow, a, b))
				useAVX2 = true
				require.NoError(t, Apply3(dt, op, fast, a, b))
				requireSameResult(t, dt, slow, fast, "avx2 vs generic")
				if !dt.IsFloat() || (op != transport.Max && op != transport.Min) {
					// Which NaN payload max/min returns may differ; everything else is bit-exact.
					require.Equal(t, slow, fast, "%s %s n=%d: bit patterns (NaN payloads included)", dt, op, n)
				}
				if dt.IsFloat() {
					signedZeros(t, dt, op, slow, fast)
				}
			}
		}
	}
	// The integer kernels run for every op and width.
	for _, dt := range []transport.DType{transport.Int8, transport.Uint8, transport.Int32, transport.Uint32,
		transport.Int64, transport.Uint64} {
		for _, op := range transport.Ops {
			buf := make([]byte, 100)
			require.Equal(t, 96, fastInt(dt, op, buf, buf, buf), "%s %s", dt, op)
		}
	}
}

func TestBadInput(t *testing.T) {
	buf := make([]byte, 8)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"dtype", Apply(transport.DType(42), transport.Sum, buf, buf), "unknown dtype 42"},
		{"op", Apply(transport.Float32, transport.Op(9), buf, buf), "unknown op 9"},
		{"lengths", Apply3(transport.Float32, transport.Sum, buf, buf[:4], buf), "8, 4 and 8 bytes"},
		{"partial element", Apply(transport.Float64, transport.Sum, buf[:6], buf[:6]), "6 bytes is not a whole number of 8-byte float64"},
		{"finish world", Finish(transport.Int32, transport.Avg, buf, 0), "world of 0 ranks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.err, transport.ErrInvalid)
			require.ErrorContains(t, tt.err, tt.want)
		})
	}
}

// signedZeros checks that zero results agree in sign (requireSameResult compares
// bytes, but -0 against +0 is the case VMAXPS gets wrong without the fix-up).
func signedZeros(t *testing.T, dt transport.DType, op transport.Op, want, got []byte) {
	t.Helper()
	for i := range len(want) / dt.Size() {
		w, g := floatAt(dt, want, i), floatAt(dt, got, i)
		if w == 0 && g == 0 {
			require.Equal(t, math.Signbit(w), math.Signbit(g), "%s %s element %d: sign of zero", dt, op, i)
		}
	}
}

// TestApply3StreamMatchesApply3: the non-temporal path gives Apply3's bits at every
// length and offset (the head before dst's 32-byte boundary, the tail after the last
// whole block), for float32 sum and avg; other dtypes, ops and overlapping operands
// take Apply3's path.
func TestApply3StreamMatchesApply3(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	for _, n := range []int{0, 1, 7, 63, 64, 65, 127, 1000, 100003} {
		for _, shift := range []int{0, 1, 3, 7} {
			for _, dt := range []transport.DType{transport.Float32, transport.Int32, transport.Float64} {
				for _, op := range []transport.Op{transport.Sum, transport.Avg, transport.Max} {
					es := dt.Size()
					mk := func() []byte {
						b := make([]byte, (n+8)*es)[shift*es:][: n*es : n*es]
						for i := range b {
							b[i] = byte(rng.Uint32())
						}
						if dt == transport.Float32 {
							for i := 0; i < n; i++ { // finite values: NaN payloads are not the point here
								binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64())))
							}
						}
						return b
					}
					a, b := mk(), mk()
					want, got := make([]byte, n*es), mk()
					require.NoError(t, Apply3(dt, op, want, a, b))
					require.NoError(t, Apply3Stream(dt, op, got, a, b))
					require.Equal(t, want, got, "n=%d shift=%d %s %s", n, shift, dt, op)
				}
			}
		}
	}
	// dst == a (in place) streams too, at every alignment of the buffer.
	for _, lag := range []int{0, 1, 3} {
		buf := make([]byte, 4*1004)
		for i := range 1004 {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(i)))
		}
		a := buf[4*lag : 4*lag+3996]
		dst := a
		b := append([]byte(nil), a...)
		want := make([]byte, 3996)
		require.NoError(t, Apply3(transport.Float32, transport.Sum, want, a, b))
		require.NoError(t, Apply3Stream(transport.Float32, transport.Sum, dst, a, b))
		require.Equal(t, want, dst, "in place, %d elements into the buffer", lag)
	}
	b := make([]byte, 8)
	a := make([]byte, 8)
	require.ErrorIs(t, Apply3Stream(transport.Float32, transport.Sum, a[:8], a[:4], b[:8]), transport.ErrInvalid)
}

// TestApply3DualMatchesApply3: both outputs of Apply3Dual hold the bits of Apply3
// followed by Finish, at every length and at every offset of each output (equal
// offsets take the non-temporal path for float32 and float64 sum and avg and for
// float16 and bfloat16 sums, unequal ones the copy), for them and other dtypes and ops,
// averages over worlds of 2 and 4 (the kernels multiply by 1/W) and 3 (Go divides),
// with d2 apart from the inputs or equal to a (in place). The floats include NaN,
// infinities, signed zeros, subnormals and sums that overflow (the 16-bit ones take
// every bit pattern). The fast path must run where it can (dual32, dual64 and dualHalf
// report it), so a broken dispatch cannot hide behind the fallback.
func TestApply3DualMatchesApply3(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 3e38, -3e38, 1.5e308,
		math.SmallestNonzeroFloat32, -3 * math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat64, 5e-324 * 7}
	float := func() float64 {
		if rng.IntN(8) == 0 {
			return special[rng.IntN(len(special))]
		}
		return rng.NormFloat64()
	}
	type opw struct {
		op    transport.Op
		world int
	}
	ops := []opw{{transport.Sum, 2}, {transport.Max, 2}, {transport.Avg, 2}, {transport.Avg, 3}, {transport.Avg, 4}}
	for _, n := range []int{0, 1, 7, 63, 64, 65, 127, 1000, 100003} {
		for _, s1 := range []int{0, 1, 3} {
			for _, s2 := range []int{0, 1} {
				for _, dt := range []transport.DType{transport.Float32, transport.Int32, transport.Float64, transport.BFloat16, transport.Float16} {
					for _, o := range ops {
						for _, inPlace := range []bool{false, true} {
							es := dt.Size()
							mk := func(shift int) []byte {
								b := make([]byte, (n+8)*es)[shift*es:][: n*es : n*es]
								i := 0
								for ; i+8 <= len(b); i += 8 {
									binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
								}
								for ; i < len(b); i++ {
									b[i] = byte(rng.Uint32())
								}
								switch dt {
								case transport.Float32:
									for i := range n {
										binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(float())))
									}
								case transport.Float64:
									for i := range n {
										binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float()))
									}
								}
								return b
							}
							a, b := mk(s2), mk(0)
							want := make([]byte, n*es)
							require.NoError(t, Apply3(dt, o.op, want, a, b))
							require.NoError(t, Finish(dt, o.op, want, o.world))
							d1, d2 := mk(s1), mk(s2)
							if inPlace {
								d2 = a
							}
							require.NoError(t, Apply3Dual(dt, o.op, o.world, d1, d2, a, b))
							if dt == transport.Float16 || dt == transport.BFloat16 {
								// Random patterns pair NaNs, and which one a sum of two NaNs
								// carries differs between the vector and the scalar code.
								requireSameResult(t, dt, want, d1, fmt.Sprintf("d1: n=%d shifts=%d,%d %s %+v in place %v", n, s1, s2, dt, o, inPlace))
								requireSameResult(t, dt, want, d2, fmt.Sprintf("d2: n=%d shifts=%d,%d %s %+v in place %v", n, s1, s2, dt, o, inPlace))
								continue
							}
							require.Equal(t, want, d1, "d1: n=%d shifts=%d,%d %s %+v in place %v", n, s1, s2, dt, o, inPlace)
							require.Equal(t, want, d2, "d2: n=%d shifts=%d,%d %s %+v in place %v", n, s1, s2, dt, o, inPlace)
						}
					}
				}
			}
		}
	}
	require.ErrorIs(t, Apply3Dual(transport.Float32, transport.Sum, 2, make([]byte, 8), make([]byte, 4), make([]byte, 8), make([]byte, 8)), transport.ErrInvalid)
	require.ErrorIs(t, Apply3Dual(transport.Float32, transport.Avg, 0, make([]byte, 8), make([]byte, 8), make([]byte, 8), make([]byte, 8)), transport.ErrInvalid)
	if !useAVX2 {
		return
	}
	f := func(n, shift int) []float32 { return make([]float32, n+8)[shift : shift+n] }
	a, b := f(1000, 0), f(1000, 0)
	require.True(t, dual32(transport.Sum, 2, f(1000, 0), f(1000, 0), a, b), "equally aligned outputs stream")
	require.True(t, dual32(transport.Avg, 2, f(1000, 3), f(1000, 3), a, b), "equally misaligned outputs stream")
	require.False(t, dual32(transport.Avg, 3, f(1000, 0), f(1000, 0), a, b), "1/3 is not exact: Go divides")
	require.False(t, dual32(transport.Sum, 2, f(1000, 0), f(1000, 1), a, b), "outputs 4 bytes apart in alignment")
	require.False(t, dual32(transport.Max, 2, f(1000, 0), f(1000, 0), a, b), "max has no streaming kernel")
	g := func(n, shift int) []float64 { return make([]float64, n+8)[shift : shift+n] }
	x, y := g(1000, 0), g(1000, 0)
	require.True(t, dual64(transport.Sum, 2, g(1000, 0), g(1000, 0), x, y), "float64: equally aligned outputs stream")
	require.True(t, dual64(transport.Avg, 4, g(1000, 3), g(1000, 3), x, y), "float64: equally misaligned outputs stream")
	require.False(t, dual64(transport.Sum, 2, g(1000, 0), g(1000, 1), x, y), "float64: outputs 8 bytes apart in alignment")
	require.False(t, dual64(transport.Min, 2, g(1000, 0), g(1000, 0), x, y), "float64: min has no streaming kernel")
	require.True(t, DualStreams(transport.Float64, transport.Sum, 2) && DualStreams(transport.Float32, transport.Avg, 2), "float sums and averages stream")
	require.True(t, DualStreams(transport.BFloat16, transport.Sum, 2), "bfloat16 sums stream")
	require.True(t, DualStreams(transport.BFloat16, transport.Avg, 4), "16-bit averages stream: rounded, halved, rounded again")
	require.False(t, DualStreams(transport.Float16, transport.Avg, 3), "a 16-bit average over 3 ranks is divided in Go")
	require.False(t, DualStreams(transport.Int32, transport.Sum, 2), "int32 has no two-output kernel")
	h := func(n, shift int) []uint16 { return make([]uint16, n+16)[shift : shift+n] }
	u, v := h(1000, 0), h(1000, 0)
	for _, bf := range []bool{true, false} {
		require.True(t, dualHalf(transport.Sum, bf, 2, h(1000, 0), h(1000, 0), u, v), "bf16 %v: aligned outputs stream", bf)
		require.True(t, dualHalf(transport.Sum, bf, 3, h(1000, 5), h(1000, 5), u, v), "bf16 %v: equally misaligned outputs stream", bf)
		require.False(t, dualHalf(transport.Sum, bf, 2, h(1000, 0), h(1000, 1), u, v), "bf16 %v: outputs 2 bytes apart in alignment", bf)
		require.True(t, dualHalf(transport.Avg, bf, 2, h(1000, 3), h(1000, 3), u, v), "bf16 %v: averages over 2 ranks stream", bf)
		require.False(t, dualHalf(transport.Avg, bf, 3, h(1000, 0), h(1000, 0), u, v), "bf16 %v: 1/3 is not exact", bf)
		require.False(t, dualHalf(transport.Max, bf, 2, h(1000, 0), h(1000, 0), u, v), "bf16 %v: no max kernel", bf)
	}
	require.False(t, DualStreams(transport.Float32, transport.Avg, 3), "an average over 3 ranks is divided in Go")
}
