package tune

import (
	"fmt"
	"math"
	"time"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// Point is one timed collective: algorithm, size (bytes as algos.Bytes counts them)
// and the mean time of one call, in seconds.
type Point struct {
	Algo    string  `json:"algo"`
	Bytes   int     `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// coefficients returns how much of p's predicted time each parameter buys: seconds
// per second of Alpha, per 1/(1 GB/s) of Beta and per 1/(1 GB/s) of Gamma. They come
// from algos.CostModel.Predict itself, so the fit always matches the selector's
// formulas, whatever they are.
func coefficients(p Point, kind transport.Kind, world, chunk int) ([3]float64, error) {
	const gbps = 1e9
	unit := []algos.CostModel{
		{Alpha: time.Second, Beta: math.Inf(1), ChunkBytes: chunk},
		{Beta: gbps, ChunkBytes: chunk},
		{Beta: math.Inf(1), Gamma: gbps, ChunkBytes: chunk},
	}
	var c [3]float64
	for i, m := range unit {
		d, err := m.Predict(p.Algo, kind, p.Bytes, world)
		if err != nil {
			return c, err
		}
		c[i] = d.Seconds()
	}
	return c, nil
}

// Fit finds the non-negative Alpha, 1/Beta and 1/Gamma that predict pts (AllReduce
// over world ranks with pipelining unit chunk, 0 = the default) with the least sum of
// squared relative errors, and reports the worst relative error. It needs points of at
// least two sizes; more algorithms make Beta and Gamma separable.
func Fit(pts []Point, world, chunk int) (algos.CostModel, float64, error) {
	if world < 2 {
		return algos.CostModel{}, 0, fmt.Errorf("tune: %w: fitting needs a world of 2 or more ranks, got %d", transport.ErrInvalid, world)
	}
	rows := make([][3]float64, 0, len(pts))
	sizes := map[int]bool{}
	for _, p := range pts {
		if !(p.Seconds > 0) || p.Bytes < 0 {
			return algos.CostModel{}, 0, fmt.Errorf("tune: %w: sample %s at %d bytes took %v s; want a positive time",
				transport.ErrInvalid, p.Algo, p.Bytes, p.Seconds)
		}
		c, err := coefficients(p, transport.KindAllReduce, world, chunk)
		if err != nil {
			return algos.CostModel{}, 0, fmt.Errorf("tune: sample %s at %d bytes: %w", p.Algo, p.Bytes, err)
		}
		for i := range c {
			c[i] /= p.Seconds // relative error: each row's target becomes 1
		}
		rows = append(rows, c)
		sizes[p.Bytes] = true
	}
	if len(sizes) < 2 {
		return algos.CostModel{}, 0, fmt.Errorf("tune: %w: fitting needs samples of at least 2 sizes, got %d", transport.ErrInvalid, len(sizes))
	}
	x, ok := nnls3(rows)
	if !ok || !(x[1] > 0) {
		return algos.CostModel{}, 0, fmt.Errorf("tune: %w: the samples fit no model with a finite bandwidth (are the times from one communicator?)", transport.ErrInvalid)
	}
	m := algos.CostModel{Alpha: time.Duration(x[0] * 1e9), Beta: 1e9 / x[1], ChunkBytes: chunk}
	if x[2] > 0 {
		m.Gamma = 1e9 / x[2]
	}
	worst := 0.0
	for _, r := range rows {
		worst = math.Max(worst, math.Abs(r[0]*x[0]+r[1]*x[1]+r[2]*x[2]-1))
	}
	return m, worst, nil
}

// nnls3 solves min ||A x - 1||^2 subject to x >= 0 and x[1] > 0 for three unknowns by
// trying every set of free variables that includes x[1] and keeping the best feasible
// solution. (Without the last condition a link whose every cost grows with the bytes
// may be fitted as a free wire and a slow reduction, which leaves Beta undefined.)
func nnls3(in [][3]float64) ([3]float64, bool) {
	// Scale every column to a maximum of 1: the Alpha column is ~1e5 times the others
	// and would otherwise dominate the normal equations' rounding.
	var scale [3]float64
	for _, r := range in {
		for i := range 3 {
			scale[i] = math.Max(scale[i], math.Abs(r[i]))
		}
	}
	rows := make([][3]float64, len(in))
	for n, r := range in {
		for i := range 3 {
			if scale[i] > 0 {
				rows[n][i] = r[i] / scale[i]
			}
		}
	}
	best, bestErr, found := [3]float64{}, math.Inf(1), false
	for mask := 1; mask < 8; mask++ {
		if mask&2 == 0 {
			continue // the selector needs a finite bandwidth: 1/Beta stays free
		}
		var idx []int
		for i := range 3 {
			if mask&(1<<i) != 0 {
				idx = append(idx, i)
			}
		}
		// Normal equations over the free variables.
		k := len(idx)
		var ata [3][3]float64
		var atb [3]float64
		for _, r := range rows {
			for i := range k {
				atb[i] += r[idx[i]]
				for j := range k {
					ata[i][j] += r[idx[i]] * r[idx[j]]
				}
			}
		}
		sol, ok := solve(ata, atb, k)
		if !ok {
			continue
		}
		var x [3]float64
		feasible := true
		for i := range k {
			if sol[i] < 0 || (idx[i] == 1 && sol[i] == 0) {
				feasible = false
			}
			x[idx[i]] = sol[i]
		}
		if !feasible {
			continue
		}
		e := 0.0
		for _, r := range rows {
			d := r[0]*x[0] + r[1]*x[1] + r[2]*x[2] - 1
			e += d * d
		}
		if e < bestErr {
			best, bestErr, found = x, e, true
		}
	}
	for i := range 3 {
		if scale[i] > 0 {
			best[i] /= scale[i]
		} else {
			best[i] = 0
		}
	}
	return best, found
}

// solve does Gaussian elimination with partial pivoting on the leading k x k system.
func solve(a [3][3]float64, b [3]float64, k int) ([3]float64, bool) {
	for col := range k {
		p := col
		for r := col + 1; r < k; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if math.Abs(a[p][col]) < 1e-300 {
			return b, false
		}
		a[col], a[p] = a[p], a[col]
		b[col], b[p] = b[p], b[col]
		for r := col + 1; r < k; r++ {
			f := a[r][col] / a[col][col]
			for c := col; c < k; c++ {
				a[r][c] -= f * a[col][c]
			}
			b[r] -= f * b[col]
		}
	}
	var x [3]float64
	for r := k - 1; r >= 0; r-- {
		s := b[r]
		for c := r + 1; c < k; c++ {
			s -= a[r][c] * x[c]
		}
		x[r] = s / a[r][r]
	}
	return x, true
}
