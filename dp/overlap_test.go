package dp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/dp/dptest"
)

// Overlap is real: over a deliberately slow communicator, the first bucket's
// collective starts, and even finishes, while backward is still running. Layer 0's
// backward waits (bounded) for the first bucket's collective to end; an Engine that
// issued nothing before Wait would leave it waiting until the bound and fail. Only the
// order of events is checked, never a duration.
func TestBucketCommunicationOverlapsBackward(t *testing.T) {
	for _, c := range []struct {
		stage int
		first string // the first gradient collective
		also  string // another collective that must start before backward ends
	}{
		{0, "allreduce#0", ""},
		{1, "reducescatter#0", ""},
		{2, "reducescatter#0", ""},
		{3, "reducescatter#0", "allgather#3"}, // layer 1's prefetch during layer 2's backward
	} {
		t.Run(fmt.Sprintf("stage%d", c.stage), func(t *testing.T) {
			ctx := testCtx(t)
			const world = 2
			log := &dptest.Log{}
			inner := ranks(t, world)
			errs := parallel(world, func(r int) error {
				comm := dptest.Slow(inner[r], 5*time.Millisecond, log)
				e, err := dp.NewOn(ctx, comm, specsFor([]int{8, 16, 16, 4}), dp.Options{Stage: c.stage, FirstBucketBytes: 64, BucketBytes: 64})
				if err != nil {
					return err
				}
				if e.NumBuckets() < 3 {
					return fmt.Errorf("want several buckets, got %s", e.Buckets())
				}
				between := func(layer int) error {
					if layer != 0 {
						return nil
					}
					deadline := time.Now().Add(10 * time.Second)
					for log.Index(r, c.first+" end") < 0 {
						if time.Now().After(deadline) {
							return fmt.Errorf("rank %d: %s never ran during backward", r, c.first)
						}
						time.Sleep(time.Millisecond)
					}
					log.Add(r, "backward end")
					return nil
				}
				if err := pass(ctx, e, between); err != nil {
					return err
				}
				return e.Step(ctx)
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for r := range world {
				end := log.Index(r, "backward end")
				require.Positive(t, end)
				require.Less(t, log.Index(r, c.first+" start"), end, "rank %d: first bucket started after backward", r)
				require.Less(t, log.Index(r, c.first+" end"), end)
				if c.also != "" {
					require.Less(t, log.Index(r, c.also+" start"), end, "rank %d: %s", r, c.also)
				}
			}
		})
	}
}

// BenchmarkOverlap times, over a communicator slowed by 3 ms per collective (one bucket per layer), a DDP
// step against its parts run one after the other: backward alone (compute standing in
// for each layer's gradient), and the same collectives with no compute. It reports the
// step, backward and communication times and the hidden share; with overlap the step
// is close to max(backward, comm), not their sum.
func BenchmarkOverlap(b *testing.B) {
	const world, layers = 2, 6
	dims := []int{64}
	for range layers {
		dims = append(dims, 64)
	}
	work := func() { // a few ms of arithmetic per layer
		x := 1.0
		for i := 0; i < 1500000; i++ {
			x = x*1.0000001 + 1e-9
		}
		sink = x
	}
	ctx := context.Background()
	for _, mode := range []string{"step", "backward-only", "comm-only"} {
		b.Run(mode, func(b *testing.B) {
			inner := ranks(&testing.T{}, world)
			engines := make([]*dp.Engine, world)
			parallel(world, func(r int) error {
				var err error
				engines[r], err = dp.NewOn(ctx, dptest.Slow(inner[r], 3*time.Millisecond, nil), specsFor(dims), dp.Options{FirstBucketBytes: 16 << 10, BucketBytes: 16 << 10})
				return err
			})
			var hidden float64
			b.ResetTimer()
			for range b.N {
				parallel(world, func(r int) error {
					e := engines[r]
					between := func(int) error {
						if mode != "comm-only" {
							work()
						}
						return nil
					}
					var restore func()
					if mode == "backward-only" {
						restore = e.NoSync()
					}
					err := pass(ctx, e, between)
					if restore != nil {
						restore()
						return e.LocalStep(ctx)
					}
					if err == nil {
						err = e.Step(ctx)
					}
					if r == 0 {
						hidden += e.LastStep().Hidden()
					}
					return err
				})
			}
			b.ReportMetric(hidden/float64(b.N), "hidden")
		})
	}
}

var sink float64
