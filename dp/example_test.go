package dp_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/dp"
)

// Two goroutine ranks train one tensor with ZeRO-2: each backward adds its own
// gradient, Wait averages it (here 1.5), Step updates the rank's shard and gathers.
func Example() {
	ctx := context.Background()
	comms, err := goccl.InitLocal(ctx, 2, goccl.WithName("dp-example"))
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	out := make([]string, 2)
	for r, c := range comms {
		wg.Go(func() {
			defer c.Close()
			specs := []dp.Spec{{Name: "w", Len: 3, Init: []float32{1, 2, 3}}}
			hp := dp.AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
			eng, err := dp.New(ctx, c, specs, dp.Options{Stage: 2, AdamW: &hp})
			if err != nil {
				panic(err)
			}
			g, _ := eng.Grad(0)
			for i := range dp.F32(g)[:3] {
				dp.F32(g)[i] = float32(r + 1) // rank 0 adds 1, rank 1 adds 2
			}
			if err := eng.MarkReady(ctx, 0); err != nil {
				panic(err)
			}
			if err := eng.Wait(ctx); err != nil {
				panic(err)
			}
			if err := eng.Step(ctx); err != nil {
				panic(err)
			}
			p, _ := eng.Param(0)
			m := eng.Memory()
			out[r] = fmt.Sprintf("rank %d: w = %.2f, %d B of state for %d params (%d padded)", r, dp.F32(p)[:3], m.Total(), m.N, m.Padded)
		})
	}
	wg.Wait()
	fmt.Println(out[0])
	fmt.Println(out[1])
	// Output:
	// rank 0: w = [0.90 1.90 2.90], 40 B of state for 3 params (4 padded)
	// rank 1: w = [0.90 1.90 2.90], 40 B of state for 3 params (4 padded)
}
