package dp_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxDiff is max |a-b| over all parameters.
func maxDiff(a, b [][]float32) (abs float64) {
	for i := range a {
		for j := range a[i] {
			abs = math.Max(abs, math.Abs(float64(a[i][j])-float64(b[i][j])))
		}
	}
	return abs
}

// The seeds' equivalence: W ranks with per-rank batch b (and A accumulation steps)
// give, step after step, the parameters one process gets with batch W*b*A.
//
// The bound: the only difference is the order of float32 additions in the gradient
// (per-rank sums then an average, against one sum), a relative error of a few ulps
// (2^-24 = 6e-8) of the gradient's magnitude. AdamW's update lr*m/(sqrt(v)+eps) is
// invariant to gradient scale, so such an error moves a weight by at most about
// lr*(relative error)*(1/(1-beta1)) per step when |g| >> eps. With lr = 1e-2 and a
// few steps that is ~1e-7; we allow 2e-6, 20x that, and far below the update itself
// (lr = 1e-2 per step), so a wrong averaging factor, a missed bucket or a stale
// replica fails by orders of magnitude.
func TestEquivalentToSingleProcess(t *testing.T) {
	const tol = 2e-6
	dims := []int{13, 17, 9, 5} // 13*17+17 + 17*9+9 + 9*5+5 = 459 params: odd, prime-ish
	cases := []run{
		{world: 1, batch: 6, accum: 1},
		{world: 2, batch: 3, accum: 1},
		{world: 3, batch: 2, accum: 1},
		{world: 4, batch: 3, accum: 1},
		{world: 2, batch: 2, accum: 3},
		{world: 3, batch: 1, accum: 2},
	}
	for _, stage := range []int{0, 1, 2, 3} {
		for _, c := range cases {
			c.stage, c.dims, c.steps, c.bucket = stage, dims, 4, 256 // several buckets
			t.Run(fmt.Sprintf("stage%d/W%d/b%d/A%d", stage, c.world, c.batch, c.accum), func(t *testing.T) {
				ref := run{world: 1, batch: c.world * c.batch * c.accum, accum: 1, steps: c.steps, stage: 0, dims: dims}
				want, wantLoss, _ := train(t, ref)
				got, gotLoss, _ := train(t, c)
				for s := range c.steps {
					for r := range c.world {
						require.Equal(t, got[s][0], got[s][r], "step %d: rank %d differs from rank 0", s, r)
					}
					d := maxDiff(got[s][0], want[s][0])
					t.Logf("step %d diff %.3g", s, d)
					require.LessOrEqual(t, d, tol, "step %d: parameters differ from one process by %g", s, d)
					// The mean of the ranks' losses is the big batch's loss.
					var mean float64
					for _, l := range gotLoss[s] {
						mean += l / float64(c.world)
					}
					require.InDelta(t, wantLoss[s][0], mean, 1e-5, "step %d loss", s)
				}
				// And training moved the parameters by far more than the tolerance.
				require.Greater(t, maxDiff(want[c.steps-1][0], want[0][0]), 1000*tol)
			})
		}
	}
}
