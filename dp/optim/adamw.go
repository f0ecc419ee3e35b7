package optim

import (
	"fmt"
	"math"
)

// AdamW holds the optimizer's hyper-parameters.
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
}

// Default is PyTorch's torch.optim.AdamW default: lr 1e-3, betas (0.9, 0.999), eps 1e-8,
// weight decay 0.01.
func Default() AdamW {
	return AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
}

// Validate says which hyper-parameter is out of range and what range is valid.
func (h AdamW) Validate() error {
	finite := func(x float32) bool { return !math.IsInf(float64(x), 0) }
	switch {
	case !(h.LR >= 0) || !finite(h.LR):
		return fmt.Errorf("optim: AdamW learning rate %v (want finite and >= 0)", h.LR)
	case !(h.Beta1 >= 0 && h.Beta1 < 1) || !(h.Beta2 >= 0 && h.Beta2 < 1):
		return fmt.Errorf("optim: AdamW betas (%v, %v) (want each in [0, 1))", h.Beta1, h.Beta2)
	case !(h.Eps > 0) || !finite(h.Eps):
		return fmt.Errorf("optim: AdamW eps %v (want finite and > 0)", h.Eps)
	case !(h.WeightDecay >= 0) || !finite(h.WeightDecay):
		return fmt.Errorf("optim: AdamW weight decay %v (want finite and >= 0)", h.WeightDecay)
	}
	return nil
}

// Corrections returns the bias-correction factors 1-b1^t and 1-b2^t for 1-based step
// t, computed in float64 so that every shard (and every rank) uses the same values.
func (h AdamW) Corrections(step int) (c1, c2 float32) {
	return float32(1 - math.Pow(float64(h.Beta1), float64(step))),
		float32(1 - math.Pow(float64(h.Beta2), float64(step)))
}

// Step applies one AdamW update for 1-based step t to master, m and v in place, reading
// the gradient g multiplied by scale (the inverse loss scale, or 1). All four slices
// must have the same length.
func (h AdamW) Step(master, m, v, g []float32, scale float32, step int) {
	c1, c2 := h.Corrections(step)
	lr, b1, b2, eps := h.LR, h.Beta1, h.Beta2, h.Eps
	decay := 1 - h.LR*h.WeightDecay
	n := len(master)
	m, v, g = m[:n], v[:n], g[:n]
	for i := range master {
		gi := g[i] * scale
		mi := b1*m[i] + (1-b1)*gi
		vi := b2*v[i] + (1-b2)*gi*gi
		m[i], v[i] = mi, vi
		den := float32(math.Sqrt(float64(vi/c2))) + eps
		master[i] = master[i]*decay - lr*(mi/c1)/den
	}
}
