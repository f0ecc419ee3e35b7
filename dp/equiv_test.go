package dp_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/internal/seeds"
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

// requireEquivalent trains c and one process with c's whole batch (W*b*A) and
// requires, at every step, the same parameters on every rank, within tol of the one
// process's, and the mean of the ranks' losses equal to its loss. It returns the one
// process's parameters.
func requireEquivalent(t *testing.T, c run, tol float64) [][][][]float32 {
	t.Helper()
	ref := run{world: 1, batch: c.world * c.batch * c.accum, accum: 1, steps: c.steps, dims: c.dims, eps: c.eps}
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
	return want
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
				want := requireEquivalent(t, c, tol)
				// And training moved the parameters by far more than the tolerance.
				require.Greater(t, maxDiff(want[c.steps-1][0], want[0][0]), 1000*tol)
			})
		}
	}
}

// TestRandomEquivalence is TestEquivalentToSingleProcess over random shapes and
// settings: 1-5 layers of 1-40 units, 1-4 ranks over inmem, shm or tcp, any algorithm,
// per-rank batches of 1-4 and 1-3 accumulation steps, every ZeRO stage, buckets from
// 4 bytes (one per parameter tensor, or less) to 1 MiB (one for all), and shared
// memory. The bound is the one above, with AdamW's epsilon at 1e-3 instead of 1e-8: the
// update lr*m/(sqrt(v)+eps) follows the gradient's scale only where |g| >> eps, and a
// gradient element that sums to about 0 (a unit that a random shape leaves dead for
// most of the batch) is where the order of the additions shows most. With eps = 1e-8 a
// rounding difference in such an element moved weights by 2.2e-6 to 1.6e-4 in 4 of 400
// seeds; with eps = 1e-3 an error d in a gradient moves its weight by at
// most about lr*d/eps = 10d, and 400 seeds stayed within 1.2e-7.
// GOCCL_RANDOM_SEEDS=n runs n seeds (a soak) from GOCCL_RANDOM_SEED, as the root
// package's TestRandomCalls does.
func TestRandomEquivalence(t *testing.T) {
	const tol = 2e-6
	n := 8
	if testing.Short() {
		n = 2
	}
	for _, seed := range seeds.List(t, n, 0) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		dims := make([]int, 2+rng.IntN(5))
		for i := range dims {
			dims[i] = 1 + rng.IntN(40)
		}
		dims[len(dims)-1] = max(dims[len(dims)-1], 2) // classes
		c := run{world: 1 + rng.IntN(4), batch: 1 + rng.IntN(4), accum: 1 + rng.IntN(3), steps: 3, stage: rng.IntN(4),
			dims: dims, bucket: []int{0, 4, 64, 1000, 4096, 1 << 20}[rng.IntN(6)], eps: 1e-3}
		tr := []string{"inmem", "shm", "tcp"}[rng.IntN(3)]
		if raceEnabled {
			tr = []string{"inmem", "tcp"}[rng.IntN(2)] // the race detector cannot see shm's ordering
		}
		c.shared = tr == "shm" && rng.IntN(2) == 0
		algo := []string{"auto", "ring", "tree", "naive", "rd"}[rng.IntN(5)]
		c.opts = []goccl.Option{goccl.WithTransport(tr), goccl.WithAlgo(algo)}
		name := fmt.Sprintf("seed%d/stage%d/W%d/b%d/A%d/dims%v/bucket%d/%s/%s/shared=%t", seed, c.stage, c.world, c.batch,
			c.accum, dims, c.bucket, tr, algo, c.shared)
		t.Run(name, func(t *testing.T) {
			requireEquivalent(t, c, tol)
		})
	}
}
