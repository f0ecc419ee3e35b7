package goccl_test

import (
	"context"
	"sync"
	"testing"

	"github.com/goccl/goccl"
)

// BenchmarkObservability measures what observability costs an 8-byte AllReduce between
// two goroutine ranks: with tracing off (the default; the flight recorder and counters
// are always on) and with GOCCL_TRACE set. Run: go test -run '^$' -bench Observability .
func BenchmarkObservability(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []goccl.Option
	}{
		{"trace-off", nil},
		{"trace-on", []goccl.Option{goccl.WithTrace(b.TempDir())}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			comms, err := goccl.InitLocal(ctx, 2, append(tc.opts, goccl.WithAlgo("ring"))...)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				for _, c := range comms {
					c.Close()
				}
			}()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, c := range comms {
				wg.Go(func() {
					xs := []float64{1}
					for range b.N {
						if err := goccl.AllReduceSlice(ctx, c, xs, goccl.Sum); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// BenchmarkBroadcastSmall is an 8-byte Broadcast between two goroutine ranks over shm,
// per algorithm; with -benchmem it shows what each allocates per call (the ring's
// pipe and transfer lists stay on the stack: BENCHMARKS.md, "Speed", 21).
// Run: go test -run '^$' -bench BroadcastSmall -benchmem .
func BenchmarkBroadcastSmall(b *testing.B) {
	for _, algo := range []string{"ring", "tree", "naive"} {
		b.Run(algo, func(b *testing.B) {
			ctx := context.Background()
			comms, err := goccl.InitLocal(ctx, 2, goccl.WithTransport("shm"), goccl.WithAlgo(algo))
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				for _, c := range comms {
					c.Close()
				}
			}()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := []float32{1, 2}
					for range b.N {
						if err := c.Broadcast(ctx, goccl.HostSlice(buf), goccl.HostSlice(buf), 2, goccl.Float32, 0); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
