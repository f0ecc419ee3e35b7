package algostest

import (
	"context"
	"fmt"
	"testing"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// BenchSizes are the AllReduce sizes BenchAllReduce sweeps, 4 KiB to 64 MiB.
var BenchSizes = []int{4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20}

// BenchAllReduce measures out-of-place float32-sum AllReduce with alg on 2 and 4
// goroutine ranks over inmem links, at every size in BenchSizes. Bytes/s is nccl-tests'
// algbw (buffer bytes / time); the busGB/s metric is busbw = algbw x 2(W-1)/W, the
// number comparable across world sizes and with the peers in bench/peers.
func BenchAllReduce(b *testing.B, alg algos.Algorithm) {
	for _, w := range []int{2, 4} {
		for _, n := range BenchSizes {
			b.Run(fmt.Sprintf("world%d/%s", w, sizeName(n)), func(b *testing.B) {
				m, err := NewMesh(context.Background(), w)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				args := make([]*algos.Args, w)
				for r := range w {
					args[r] = &algos.Args{Kind: transport.KindAllReduce, DType: transport.Float32, Op: transport.Sum,
						Count: n / 4, Send: make([]byte, n), Recv: make([]byte, n)}
				}
				ctx := context.Background()
				b.SetBytes(int64(n))
				for b.Loop() {
					if err := FirstError(m.RunAlgorithm(ctx, alg, args)); err != nil {
						b.Fatal(err)
					}
				}
				secs := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(float64(n)/secs/1e9*2*float64(w-1)/float64(w), "busGB/s")
			})
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
