package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
)

// tcase is one collective call every rank makes with the same parameters.
type tcase struct {
	kind    goccl.Kind
	dt      goccl.DType
	op      goccl.Op
	count   int
	root    int
	inPlace bool
	seed    int
}

func (t tcase) String() string {
	return fmt.Sprintf("%s %s %s count=%d root=%d inplace=%v", t.kind, t.dt, t.op, t.count, t.root, t.inPlace)
}

// cases covers AllReduce, Reduce and Broadcast over four dtypes, three ops, counts 0,
// 1, odd, not divisible by the world size and large, every root, in and out of place.
func cases(w int) []tcase {
	var out []tcase
	seed := 0
	for _, k := range []goccl.Kind{goccl.KindAllReduce, goccl.KindReduce, goccl.KindBroadcast} {
		ops := []goccl.Op{goccl.Sum, goccl.Avg, goccl.Max}
		if k == goccl.KindBroadcast {
			ops = ops[:1]
		}
		for _, dt := range []goccl.DType{goccl.Float32, goccl.Float64, goccl.Int32, goccl.BFloat16} {
			for _, op := range ops {
				for _, n := range []int{0, 1, 7, w + 1, 65537} {
					seed++
					out = append(out, tcase{kind: k, dt: dt, op: op, count: n, root: seed % w, inPlace: seed%2 == 0, seed: seed})
				}
			}
		}
	}
	return append(out, tcase{kind: goccl.KindAllReduce, dt: goccl.Float32, op: goccl.Sum, count: 4<<20 + 3, seed: seed + 1})
}

// value is rank r's element i in case s: a small integer, so sums over a few ranks are
// exact in every dtype (bfloat16 holds integers up to 256 exactly).
func value(r, i, s int) float64 { return float64((r*7+i*13+s*5)%17 - 8) }

func check(ctx context.Context, c *goccl.Comm) int {
	r, w := c.Rank(), c.Size()
	m := hostModel(c)
	printed := map[goccl.Kind]bool{}
	all := cases(w)
	for _, tc := range all {
		esz := tc.dt.Size()
		n := tc.count * esz
		send := make([]byte, n)
		for i := range tc.count {
			put(tc.dt, send, i, value(r, i, tc.seed))
		}
		recv := make([]byte, n)
		for i := range recv {
			recv[i] = 0xa5 // garbage: an output the algorithm forgot to write cannot pass
		}
		if tc.inPlace {
			recv = send
		}
		if !printed[tc.kind] && tc.count == w+1 {
			printed[tc.kind] = true
			algo, why := c.Algo(tc.kind, n)
			fmt.Printf("ALGO rank=%d kind=%s bytes=%d algo=%s why=%q\n", r, tc.kind, n, algo, why)
			a, _, _ := algos.Resolve("auto", tc.kind, n, w, m)
			if a != nil {
				fmt.Printf("MODEL rank=%d kind=%s bytes=%d auto=%s\n", r, tc.kind, n, a.Name())
			}
		}
		var err error
		sb, rb := goccl.Host(send), goccl.Host(recv)
		switch tc.kind {
		case goccl.KindAllReduce:
			err = c.AllReduce(ctx, sb, rb, tc.count, tc.dt, tc.op)
		case goccl.KindReduce:
			err = c.Reduce(ctx, sb, rb, tc.count, tc.dt, tc.op, tc.root)
		case goccl.KindBroadcast:
			err = c.Broadcast(ctx, sb, rb, tc.count, tc.dt, tc.root)
		}
		if err != nil {
			fmt.Printf("CHECK-FAIL rank=%d case=%q err=%q\n", r, tc, err.Error())
			return 1
		}
		if tc.kind == goccl.KindReduce && r != tc.root {
			continue
		}
		for i := range tc.count {
			want := reference(tc, i, w)
			got := get(tc.dt, recv, i)
			if math.Abs(got-want) > tolerance(tc, want) || math.IsNaN(got) {
				fmt.Printf("CHECK-FAIL rank=%d case=%q elem=%d got=%v want=%v\n", r, tc, i, got, want)
				return 1
			}
		}
	}
	fmt.Printf("CHECK-OK rank=%d cases=%d\n", r, len(all))
	return 0
}

// reference is the serial float64 result for element i (integer Avg truncates).
func reference(tc tcase, i, w int) float64 {
	if tc.kind == goccl.KindBroadcast {
		return value(tc.root, i, tc.seed)
	}
	acc := value(0, i, tc.seed)
	for r := 1; r < w; r++ {
		v := value(r, i, tc.seed)
		if tc.op == goccl.Max {
			acc = math.Max(acc, v)
		} else {
			acc += v
		}
	}
	if tc.op == goccl.Avg {
		acc /= float64(w)
		if !tc.dt.IsFloat() {
			acc = math.Trunc(acc)
		}
	}
	return acc
}

// tolerance: sums and maxima of small integers are exact; Avg rounds once when it
// divides (and once more when a 16-bit result is stored).
func tolerance(tc tcase, want float64) float64 {
	if tc.op != goccl.Avg || !tc.dt.IsFloat() {
		return 0
	}
	u := map[goccl.DType]float64{goccl.BFloat16: 0x1p-8 + 0x1p-24, goccl.Float32: 0x1p-24, goccl.Float64: 0x1p-53}[tc.dt]
	return 2 * u * math.Abs(want)
}

var le = binary.LittleEndian

func put(dt goccl.DType, b []byte, i int, v float64) {
	switch dt {
	case goccl.Float32:
		le.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case goccl.Float64:
		le.PutUint64(b[8*i:], math.Float64bits(v))
	case goccl.Int32:
		le.PutUint32(b[4*i:], uint32(int32(v)))
	case goccl.BFloat16: // small integers are exact: truncating the float32 is exact
		le.PutUint16(b[2*i:], uint16(math.Float32bits(float32(v))>>16))
	}
}

func get(dt goccl.DType, b []byte, i int) float64 {
	switch dt {
	case goccl.Float32:
		return float64(math.Float32frombits(le.Uint32(b[4*i:])))
	case goccl.Float64:
		return math.Float64frombits(le.Uint64(b[8*i:]))
	case goccl.Int32:
		return float64(int32(le.Uint32(b[4*i:])))
	case goccl.BFloat16:
		return float64(math.Float32frombits(uint32(le.Uint16(b[2*i:])) << 16))
	}
	return math.NaN()
}
