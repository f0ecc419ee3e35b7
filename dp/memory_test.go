package dp_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/dp"
)

// Per-rank bytes against the seeds' table: with 2-byte working types DDP holds 16N,
// ZeRO-1 4N+12N/W, ZeRO-2 2N+14N/W and ZeRO-3 16N/W, where N is the padded count (each
// unit rounded up to a multiple of W, so less than W extra elements per unit); with
// fp32 the parameters are the master weights and K drops from 12 to 8. The Host
// device's own count of live bytes must agree: nothing is held that is not reported.
func TestMemoryAccounting(t *testing.T) {
	dims := []int{11, 23, 7} // 11*23+23 + 23*7+7 = 444 params
	const n = 444
	for _, prec := range []string{"bf16", "fp16", "fp32"} {
		for _, stage := range []int{0, 1, 2, 3} {
			for _, world := range []int{1, 2, 3, 4} {
				t.Run(fmt.Sprintf("%s/stage%d/W%d", prec, stage, world), func(t *testing.T) {
					ctx := testCtx(t)
					comms := ranks(t, world)
					devs := make([]*dp.Host, world)
					mems := make([]dp.Memory, world)
					units := make([]int, world)
					errs := parallel(world, func(r int) error {
						devs[r] = dp.NewHost()
						eng, err := dp.NewOn(ctx, comms[r], specsFor(dims), dp.Options{Stage: stage, Precision: prec, Device: devs[r], FirstBucketBytes: 300, BucketBytes: 300})
						if err != nil {
							return err
						}
						defer eng.Close()
						if err := oneStep(ctx, eng); err != nil {
							return err
						}
						mems[r], units[r] = eng.Memory(), eng.NumBuckets()
						require.Equal(t, mems[r].Total(), devs[r].Live(), "rank %d: device holds bytes the report does not show", r)
						return nil
					})
					for r, err := range errs {
						require.NoError(t, err, "rank %d", r)
					}
					p := 2
					if prec == "fp32" {
						p = 4
					}
					for r, m := range mems {
						require.EqualValues(t, n, m.N)
						if stage == 0 {
							require.EqualValues(t, n, m.Padded, "DDP pads nothing")
						} else {
							require.Zero(t, m.Padded%int64(world))
							require.Less(t, m.Padded-n, int64(units[r]*world), "padding is under W elements per unit")
						}
						want := dp.ExpectedBytes(stage, m.Padded, world, p)
						require.Equal(t, want, float64(m.Total()), "rank %d: %+v", r, m)
						if p == 2 {
							require.Equal(t, dp.Expected(stage, m.Padded, world), float64(m.Total()))
							require.EqualValues(t, 4*m.Padded/int64(map[bool]int{true: 1, false: world}[stage == 0]), m.Master)
						} else {
							require.Zero(t, m.Master, "fp32 parameters are the master weights")
						}
						switch stage {
						case 0, 1:
							require.Zero(t, m.WorkingPeak)
						case 2: // gradient buckets, each freed once reduce-scattered
							require.Positive(t, m.WorkingPeak)
						case 3: // at most two gathered layers and two gradient buckets
							largest := 0
							for l := 0; l+1 < len(dims); l++ {
								n := dims[l]*dims[l+1] + dims[l+1]
								largest = max(largest, (n+world-1)/world*world)
							}
							require.Positive(t, m.WorkingPeak)
							require.LessOrEqual(t, m.WorkingPeak, int64(4*largest*p))
						}
					}
				})
			}
		}
	}
}

// specsFor registers an MLP-shaped parameter list with deterministic values.
func specsFor(dims []int) []dp.Spec {
	var s []dp.Spec
	for l := 0; l+1 < len(dims); l++ {
		w, b := make([]float32, dims[l]*dims[l+1]), make([]float32, dims[l+1])
		for i := range w {
			w[i] = float32(i%7) * 0.01
		}
		s = append(s, dp.Spec{Name: fmt.Sprintf("fc%d.weight", l), Len: len(w), Layer: l, Init: w},
			dp.Spec{Name: fmt.Sprintf("fc%d.bias", l), Len: len(b), Layer: l, Init: b})
	}
	return s
}
