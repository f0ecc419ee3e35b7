package perf

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/goccl/goccl/transport"
	"github.com/stretchr/testify/require"
)

func TestHalfConversions(t *testing.T) {
	// Reference bit patterns of IEEE binary16 and bfloat16 (round to nearest even).
	f16 := map[float32]uint16{
		1: 0x3c00, -2: 0xc000, 65504: 0x7bff, 65520: 0x7c00, 0.1: 0x2e66, 1.0 / 3: 0x3555,
		0x1p-24: 0x0001, 0x1p-25: 0x0000, 0x1.8p-25: 0x0001, 0x1p-14: 0x0400, 2049: 0x6800, 2051: 0x6802,
	}
	for v, want := range f16 {
		require.Equal(t, want, f32ToF16(v), "f16 of %v", v)
	}
	bf16 := map[float32]uint16{1: 0x3f80, -2: 0xc000, 1.0 / 3: 0x3eab, 0.1: 0x3dcd, 257: 0x4380, 259: 0x4382}
	for v, want := range bf16 {
		require.Equal(t, want, f32ToBF16(v), "bf16 of %v", v)
	}
	for _, h := range []uint16{0x3c00, 0x3555, 0x0001, 0x7bff, 0xc000, 0x0400} {
		require.Equal(t, h, f32ToF16(f16ToF32(h)))
	}
}

// simOp reduces two elements with the type's own Go arithmetic: the independent
// reference. half and bfloat16 are computed in float32 and rounded after every step,
// as goccl's kernels do.
func simOp(d transport.DType, op transport.Op, a, b uint64) uint64 {
	switch d {
	case transport.Int8:
		return uint64(uint8(intOp(int8(a), int8(b), op)))
	case transport.Uint8:
		return uint64(intOp(uint8(a), uint8(b), op))
	case transport.Int32:
		return uint64(uint32(intOp(int32(a), int32(b), op)))
	case transport.Uint32:
		return uint64(intOp(uint32(a), uint32(b), op))
	case transport.Int64:
		return uint64(intOp(int64(a), int64(b), op))
	case transport.Uint64:
		return intOp(a, b, op)
	case transport.Float32:
		return uint64(math.Float32bits(floatOp(math.Float32frombits(uint32(a)), math.Float32frombits(uint32(b)), op)))
	case transport.Float64:
		return math.Float64bits(floatOp(math.Float64frombits(a), math.Float64frombits(b), op))
	case transport.Float16:
		return uint64(f32ToF16(floatOp(f16ToF32(uint16(a)), f16ToF32(uint16(b)), op)))
	case transport.BFloat16:
		return uint64(f32ToBF16(floatOp(math.Float32frombits(uint32(a)<<16), math.Float32frombits(uint32(b)<<16), op)))
	}
	panic("dtype")
}

func intOp[T int8 | uint8 | int32 | uint32 | int64 | uint64](a, b T, op transport.Op) T {
	switch op {
	case transport.Sum, transport.Avg:
		return a + b
	case transport.Prod:
		return a * b
	case transport.Max:
		return max(a, b)
	}
	return min(a, b)
}

func floatOp[T float32 | float64](a, b T, op transport.Op) T {
	switch op {
	case transport.Sum, transport.Avg:
		return a + b
	case transport.Prod:
		return a * b
	case transport.Max:
		return max(a, b)
	}
	return min(a, b)
}

// simDiv is the final division of avg, in the type's arithmetic.
func simDiv(d transport.DType, v uint64, n int) uint64 {
	switch d {
	case transport.Int8:
		return uint64(uint8(int8(v) / int8(n)))
	case transport.Uint8:
		return uint64(uint8(v) / uint8(n))
	case transport.Int32:
		return uint64(uint32(int32(v) / int32(n)))
	case transport.Uint32:
		return uint64(uint32(v) / uint32(n))
	case transport.Int64:
		return uint64(int64(v) / int64(n))
	case transport.Uint64:
		return v / uint64(n)
	case transport.Float32:
		return uint64(math.Float32bits(math.Float32frombits(uint32(v)) / float32(n)))
	case transport.Float64:
		return math.Float64bits(math.Float64frombits(v) / float64(n))
	case transport.Float16:
		return uint64(f32ToF16(f16ToF32(uint16(v)) / float32(n)))
	case transport.BFloat16:
		return uint64(f32ToBF16(math.Float32frombits(uint32(v)<<16) / float32(n)))
	}
	panic("dtype")
}

// simReduce folds vals in a random order, either left to right or as a pairwise tree.
func simReduce(rng *rand.Rand, d transport.DType, op transport.Op, vals []uint64) uint64 {
	v := append([]uint64(nil), vals...)
	rng.Shuffle(len(v), func(i, j int) { v[i], v[j] = v[j], v[i] })
	if rng.IntN(2) == 0 {
		acc := v[0]
		for _, x := range v[1:] {
			acc = simOp(d, op, acc, x)
		}
		return acc
	}
	for len(v) > 1 {
		var next []uint64
		for i := 0; i+1 < len(v); i += 2 {
			next = append(next, simOp(d, op, v[i], v[i+1]))
		}
		if len(v)%2 == 1 {
			next = append(next, v[len(v)-1])
		}
		v = next
	}
	return v[0]
}

func getElt(p []byte, es int, i int64) uint64 {
	q := p[i*int64(es):]
	switch es {
	case 1:
		return uint64(q[0])
	case 2:
		return uint64(binary.NativeEndian.Uint16(q))
	case 4:
		return uint64(binary.NativeEndian.Uint32(q))
	}
	return binary.NativeEndian.Uint64(q)
}

func putElt(p []byte, es int, i int64, v uint64) {
	q := p[i*int64(es):]
	switch es {
	case 1:
		q[0] = byte(v)
	case 2:
		binary.NativeEndian.PutUint16(q, uint16(v))
	case 4:
		binary.NativeEndian.PutUint32(q, uint32(v))
	default:
		binary.NativeEndian.PutUint64(q, v)
	}
}

// simulate runs the collective on the ranks' send buffers by its definition and
// returns every rank's receive buffer.
func simulate(rng *rand.Rand, c *Collective, d transport.DType, op transport.Op, root, n int, k Counts, sends [][]byte) [][]byte {
	es := d.Size()
	recvs := make([][]byte, n)
	for r := range recvs {
		recvs[r] = make([]byte, k.Recv*int64(es))
	}
	reduced := func(i int64) uint64 {
		vals := make([]uint64, n)
		for r := range n {
			vals[r] = getElt(sends[r], es, i)
		}
		v := simReduce(rng, d, op, vals)
		if op == transport.Avg {
			v = simDiv(d, v, n)
		}
		return v
	}
	base := k.Param
	for j := range n {
		for e := int64(0); e < k.Recv; e++ {
			var v uint64
			switch c.Kind {
			case transport.KindAllReduce, transport.KindReduce:
				if c.Kind == transport.KindReduce && j != root {
					continue
				}
				v = reduced(e)
			case transport.KindReduceScatter:
				v = reduced(int64(j)*base + e)
			case transport.KindBroadcast:
				v = getElt(sends[root], es, e)
			case transport.KindAllGather, transport.KindGather:
				if c.Kind == transport.KindGather && j != root {
					continue
				}
				v = getElt(sends[e/base], es, e%base)
			case transport.KindScatter:
				v = getElt(sends[root], es, int64(j)*base+e)
			case transport.KindAllToAll:
				v = getElt(sends[e/base], es, int64(j)*base+e%base)
			case transport.KindSendRecv:
				v = getElt(sends[(j-1+n)%n], es, e)
			}
			putElt(recvs[j], es, e, v)
		}
	}
	return recvs
}

func TestCheckAgainstSimulation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int64{0, 1, 7, 1001, 4096 + 24}
	for _, c := range Collectives {
		ops := []transport.Op{transport.Sum}
		if c.Reduces {
			ops = transport.Ops
		}
		for _, d := range transport.DTypes {
			for _, op := range ops {
				for _, n := range []int{1, 2, 3, 5, 8} {
					root := n - 1
					for _, size := range sizes {
						k := c.CountsFor(size*int64(d.Size())/4, d.Size(), n)
						sends := make([][]byte, n)
						checks := make([]*Check, n)
						for r := range n {
							checks[r] = &Check{Coll: c, DType: d, Op: op, Root: root, N: n, Rank: r, Seed: uint64(size) + 11, K: k}
							sends[r] = make([]byte, k.Send*int64(d.Size()))
							checks[r].Fill(sends[r])
						}
						recvs := simulate(rng, c, d, op, root, n, k, sends)
						for r := range n {
							require.Zero(t, checks[r].Verify(recvs[r]), "%s %s %s n=%d size=%d rank %d", c.Name, d, op, n, size, r)
						}
						// One flipped exponent/high bit on a checked rank must be caught.
						if k.Recv > 0 {
							r := root
							p := recvs[r][(k.Recv-1)*int64(d.Size()):]
							p[d.Size()-1] ^= 0x40
							require.Equal(t, int64(1), checks[r].Verify(recvs[r]), "%s %s %s n=%d size=%d corrupted", c.Name, d, op, n, size)
						}
					}
				}
			}
		}
	}
}

func TestCheckInputsAreNotTrivial(t *testing.T) {
	// A generator that wrote zeros everywhere would pass every check; make sure inputs
	// differ between ranks and elements, and that results are not all zero.
	for _, c := range []*Collective{Collectives[0], Collectives[1]} {
		for _, d := range transport.DTypes {
			k := c.CountsFor(4096, d.Size(), 4)
			a := &Check{Coll: c, DType: d, Op: transport.Sum, N: 4, Rank: 0, Seed: 5, K: k}
			b := &Check{Coll: c, DType: d, Op: transport.Sum, N: 4, Rank: 1, Seed: 5, K: k}
			pa, pb := make([]byte, k.Send*int64(d.Size())), make([]byte, k.Send*int64(d.Size()))
			a.Fill(pa)
			b.Fill(pb)
			require.NotEqual(t, pa, pb, "%s %s", c.Name, d)
			distinct := map[uint64]bool{}
			nonzero := 0
			for i := int64(0); i < k.Recv; i++ {
				v := a.Expected(i)
				distinct[v] = true
				if v != 0 {
					nonzero++
				}
			}
			require.Greater(t, len(distinct), 8, "%s %s", c.Name, d)
			require.Greater(t, nonzero, int(k.Recv)/2, "%s %s", c.Name, d)
		}
	}
}

func TestAvgTolerance(t *testing.T) {
	require.Equal(t, uint64(0), ulpDistance(0x3c00, 0x3c00, transport.Float16))
	require.Equal(t, uint64(2), ulpDistance(0x3c02, 0x3c00, transport.Float16))
	require.Equal(t, uint64(2), ulpDistance(0x8001, 0x0001, transport.Float16)) // -tiny to +tiny
	require.Equal(t, uint64(1), ulpDistance(math.Float64bits(1), math.Float64bits(math.Nextafter(1, 2)), transport.Float64))
}
