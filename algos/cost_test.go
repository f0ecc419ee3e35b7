package algos_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// TestPredictRingFormula checks the ring AllReduce prediction against the closed form
// 2(W-1) alpha + 2(W-1)/W n / beta + (W-1)/W n / gamma, for worlds up to 1024.
func TestPredictRingFormula(t *testing.T) {
	m := algos.CostModel{Alpha: 10 * time.Microsecond, Beta: 1e9, Gamma: 4e9}
	for _, w := range []int{2, 3, 7, 64, 1000, 1024} {
		for _, n := range []int{0, 8, 1 << 20, 1 << 30} {
			got, err := m.Predict("ring", transport.KindAllReduce, n, w)
			require.NoError(t, err)
			wf, nf := float64(w), float64(n)
			want := 2*(wf-1)*10e-6 + 2*(wf-1)/wf*nf/1e9 + (wf-1)/wf*nf/4e9
			require.InDelta(t, want, got.Seconds(), 1e-9*max(1, want), "w=%d n=%d", w, n)
		}
	}
}

func TestPredictShape(t *testing.T) {
	m := algos.TCPModel
	for _, name := range []string{"ring", "tree", "naive"} {
		for _, k := range transport.Kinds {
			for _, w := range []int{1, 2, 5, 128, 1024} {
				prev := time.Duration(-1)
				for _, n := range []int{0, 8, 4 << 10, 1 << 20, 64 << 20, 1 << 30} {
					got, err := m.Predict(name, k, n, w)
					require.NoError(t, err)
					require.GreaterOrEqual(t, got, prev, "%s %s w=%d: time must not fall as bytes grow", name, k, w)
					require.Less(t, got, time.Duration(math.MaxInt64/2), "%s %s w=%d n=%d: finite", name, k, w, n)
					if w == 1 {
						require.Zero(t, got, "one rank is a local copy")
					}
					prev = got
				}
			}
		}
	}
	// More ranks cost more steps for the ring, only log W more for the tree.
	r8, _ := m.Predict("ring", transport.KindAllReduce, 8, 8)
	r1024, _ := m.Predict("ring", transport.KindAllReduce, 8, 1024)
	t8, _ := m.Predict("tree", transport.KindAllReduce, 8, 8)
	t1024, _ := m.Predict("tree", transport.KindAllReduce, 8, 1024)
	require.InDelta(t, 1023.0/7, float64(r1024)/float64(r8), 1)
	require.Less(t, float64(t1024)/float64(t8), 4.0)
}

func TestPredictErrors(t *testing.T) {
	_, err := algos.TCPModel.Predict("bogus", transport.KindAllReduce, 8, 2)
	require.ErrorContains(t, err, `no cost formula for algorithm "bogus"`)
	_, err = algos.TCPModel.Predict("ring", transport.KindAllReduce, 8, 0)
	require.ErrorIs(t, err, transport.ErrInvalid)
	_, err = algos.TCPModel.Predict("ring", transport.KindAllReduce, -1, 4)
	require.ErrorIs(t, err, transport.ErrInvalid)
	z, err := algos.CostModel{}.Predict("ring", transport.KindAllReduce, 1<<20, 4)
	require.NoError(t, err)
	tcp, _ := algos.TCPModel.Predict("ring", transport.KindAllReduce, 1<<20, 4)
	require.LessOrEqual(t, z, tcp, "the zero model is TCP's alpha and beta without the reduce term")
}
