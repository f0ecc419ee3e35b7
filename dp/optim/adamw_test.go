package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/dp/optim"
)

// The fused float32 update matches PyTorch's AdamW formula evaluated in float64, step
// after step, to float32 precision.
func TestAdamWMatchesFloat64Formula(t *testing.T) {
	h := optim.AdamW{LR: 0.01, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1}
	for _, n := range []int{0, 1, 7, 1000} {
		p, m, v := make([]float32, n), make([]float32, n), make([]float32, n)
		p64, m64, v64 := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range p {
			p[i] = float32(i%5) - 2
			p64[i] = float64(p[i])
		}
		g := make([]float32, n)
		for step := 1; step <= 5; step++ {
			for i := range g {
				g[i] = float32(math.Sin(float64(i*step))) * 4 // scaled by 1/4 below
			}
			h.Step(p, m, v, g, 0.25, step)
			for i := range p64 {
				gi := float64(g[i]) * 0.25
				m64[i] = 0.9*m64[i] + 0.1*gi
				v64[i] = 0.99*v64[i] + 0.01*gi*gi
				mh := m64[i] / (1 - math.Pow(0.9, float64(step)))
				vh := v64[i] / (1 - math.Pow(0.99, float64(step)))
				p64[i] = p64[i]*(1-0.01*0.1) - 0.01*mh/(math.Sqrt(vh)+1e-8)
			}
			for i := range p {
				require.InDelta(t, p64[i], float64(p[i]), 1e-6, "n=%d step %d element %d", n, step, i)
			}
		}
	}
}

func TestAdamWValidate(t *testing.T) {
	require.NoError(t, optim.Default().Validate())
	for _, c := range []struct {
		h    optim.AdamW
		want string
	}{
		{optim.AdamW{LR: float32(math.NaN()), Eps: 1}, "learning rate NaN (want finite and >= 0)"},
		{optim.AdamW{LR: float32(math.Inf(1)), Eps: 1}, "learning rate +Inf (want finite and >= 0)"},
		{optim.AdamW{Eps: float32(math.Inf(1))}, "eps +Inf (want finite and > 0)"},
		{optim.AdamW{Eps: 1, WeightDecay: float32(math.Inf(1))}, "weight decay +Inf"},
		{optim.AdamW{Beta1: 1, Eps: 1}, "betas (1, 0) (want each in [0, 1))"},
		{optim.AdamW{}, "eps 0 (want finite and > 0)"},
		{optim.AdamW{Eps: 1, WeightDecay: -1}, "weight decay -1 (want finite and >= 0)"},
	} {
		require.ErrorContains(t, c.h.Validate(), c.want)
	}
}
