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
