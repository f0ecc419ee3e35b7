package reduce

import (
	"fmt"
	"testing"

	"github.com/goccl/goccl/transport"
)

var benchSizes = []int{4 << 10, 256 << 10, 4 << 20, 64 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkCopy is the yardstick: Go's copy() (runtime memmove, non-temporal stores from
// 1 MiB). Bytes/s counts the destination bytes, as BenchmarkApply does.
func BenchmarkCopy(b *testing.B) {
	for _, n := range benchSizes {
		dst, src := make([]byte, n), make([]byte, n)
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkApply measures dst += src for the dtypes collectives reduce most; "generic"
// forces the portable Go path so the AVX2 gain is visible in one run.
func BenchmarkApply(b *testing.B) {
	type kcase struct {
		name string
		dt   transport.DType
		avx  bool
	}
	cases := []kcase{
		{"float32", transport.Float32, true}, {"float32-generic", transport.Float32, false},
		{"float64", transport.Float64, true}, {"float64-generic", transport.Float64, false},
		{"bfloat16", transport.BFloat16, true}, {"float16", transport.Float16, true},
		{"int32", transport.Int32, true},
	}
	for _, c := range cases {
		for _, n := range benchSizes {
			dst, src := make([]byte, n), make([]byte, n)
			b.Run(c.name+"/"+sizeName(n), func(b *testing.B) {
				if c.avx && !useAVX2 && (c.dt == transport.Float32 || c.dt == transport.Float64) {
					b.Skip("no AVX2 on this CPU")
				}
				saved := useAVX2
				useAVX2 = useAVX2 && c.avx
				defer func() { useAVX2 = saved }()
				b.SetBytes(int64(n))
				for b.Loop() {
					if err := Apply(c.dt, transport.Sum, dst, src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkApply3Dual measures the fused ring step's reduce (algos/ring, fused.go):
// 64 MiB of a op b written to two outputs, 64 KiB at a time as shm's pieces arrive.
// Bytes/s counts one output's bytes.
func BenchmarkApply3Dual(b *testing.B) {
	const n, piece = 64 << 20, 64 << 10
	d1, d2, x, y := make([]byte, n), make([]byte, n), make([]byte, n), make([]byte, n)
	for _, dt := range []transport.DType{transport.Float32, transport.Float64, transport.BFloat16, transport.Int32} {
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(n)
			for b.Loop() {
				for off := 0; off < n; off += piece {
					if err := Apply3Dual(dt, transport.Sum, 2, d1[off:off+piece], d2[off:off+piece], x[off:off+piece], y[off:off+piece]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkFinish measures Avg's division (Finish) over 4 MiB, which runs on every
// averaged chunk; "generic" forces the portable Go loop.
func BenchmarkFinish(b *testing.B) {
	const n = 4 << 20
	buf := make([]byte, n)
	for _, dt := range []transport.DType{transport.Float32, transport.Float64, transport.BFloat16} {
		bothPaths(b, dt.String(), n, func() error { return Finish(dt, transport.Avg, buf, 3) })
	}
}

// bothPaths runs fn as two sub-benchmarks of n bytes per call: name, with the AVX2
// kernels where the CPU has them, and name-generic, with the portable Go path.
func bothPaths(b *testing.B, name string, n int, fn func() error) {
	for _, avx := range []bool{true, false} {
		sub := name
		if !avx {
			sub += "-generic"
		}
		b.Run(sub, func(b *testing.B) {
			saved := useAVX2
			useAVX2 = useAVX2 && avx
			defer func() { useAVX2 = saved }()
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyOps measures dst = dst op src for the ops other than Sum at 256 KiB (in
// L2) and 64 MiB (from memory), with the AVX2 kernels and with the portable Go path
// ("generic"), per dtype: products, max and min.
func BenchmarkApplyOps(b *testing.B) {
	for _, c := range []struct {
		dt transport.DType
		op transport.Op
	}{
		{transport.Float32, transport.Prod}, {transport.Float64, transport.Prod}, {transport.Int32, transport.Prod},
		{transport.Int8, transport.Prod}, {transport.Int64, transport.Prod},
		{transport.BFloat16, transport.Prod}, {transport.Int8, transport.Max}, {transport.Uint8, transport.Min},
		{transport.Int32, transport.Max}, {transport.Uint32, transport.Min}, {transport.Int64, transport.Max},
		{transport.Uint64, transport.Min},
	} {
		for _, n := range []int{256 << 10, 64 << 20} {
			dst, src := make([]byte, n), make([]byte, n)
			bothPaths(b, c.dt.String()+"-"+c.op.String()+"/"+sizeName(n), n, func() error { return Apply(c.dt, c.op, dst, src) })
		}
	}
}
