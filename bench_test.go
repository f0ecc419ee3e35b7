package goccl_test

import (
	"context"
	"fmt"
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

// BenchmarkAllToAllV compares AllToAllV with equal counts against AllToAll of the same
// blocks (which runs the selected algorithm, with its fast paths), and a two-op
// BatchSendRecv against the SendRecv of the same ring shift, between goroutine ranks
// over shm. Run: go test -run '^$' -bench AllToAllV -benchmem .
func BenchmarkAllToAllV(b *testing.B) {
	for _, world := range []int{2, 4} {
		for _, block := range []int{8, 64 << 10, 1 << 20} {
			for _, call := range []string{"alltoall", "alltoallv", "sendrecv", "batch"} {
				b.Run(fmt.Sprintf("w=%d/block=%d/%s", world, block, call), func(b *testing.B) {
					benchP2P(b, world, block, call)
				})
			}
		}
	}
}

func benchP2P(b *testing.B, world, block int, call string) {
	ctx := context.Background()
	comms, err := goccl.InitLocal(ctx, world, goccl.WithTransport("shm"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	b.SetBytes(int64(block * world))
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Go(func() {
			send, recv := make([]byte, block*world), make([]byte, block*world)
			counts := make([]int, world)
			for i := range counts {
				counts[i] = block
			}
			me := c.Rank()
			next, prev := (me+1)%world, (me+world-1)%world
			ops := []goccl.P2POp{goccl.SendOp(goccl.Host(send), block, goccl.Uint8, next), goccl.RecvOp(goccl.Host(recv), block, goccl.Uint8, prev)}
			for range b.N {
				var err error
				switch call {
				case "alltoall":
					err = c.AllToAll(ctx, goccl.Host(send), goccl.Host(recv), block, goccl.Uint8)
				case "alltoallv":
					err = c.AllToAllV(ctx, goccl.Host(send), counts, goccl.Host(recv), counts, goccl.Uint8)
				case "sendrecv":
					err = c.SendRecv(ctx, goccl.Host(send), next, goccl.Host(recv), prev, block, goccl.Uint8)
				case "batch":
					err = c.BatchSendRecv(ctx, ops)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
