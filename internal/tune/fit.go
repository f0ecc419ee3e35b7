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

// The fitted parameters, in the order of a coefficient row.
const (
	pCall = iota
	pAlpha
	pOverhead
	pAsync
	pBeta // 1/Beta, in seconds per GB
	pGamma
	nParams
)

// Shape is what a fit holds fixed: the communicator's pipelining unit (0 = the
// default), the CPU cores its ranks share (0 = a core each), its links' eager size
// (0 = algos.EagerBytes) and whether waiting ranks poll (algos.CostModel.Polls), all of
// which change the formulas' coefficients, not the parameters.
type Shape struct {
	ChunkBytes, Cores, EagerBytes int
	Polls                         bool
}

// ShapeOf is the Shape of a fit of the named transport's samples, with Polls as its
// built-in model has it (shm and the in-process transport).
func ShapeOf(name string, chunk, cores, eager int) Shape {
	return Shape{ChunkBytes: chunk, Cores: cores, EagerBytes: eager, Polls: builtin(name).Polls}
}

// tiny is the model every unit model adds to: a per-message overhead of 1 ns (a zero
// one would default to Alpha/8, see algos.CostModel) and infinitely fast links. Its
// own prediction is subtracted again.
func tiny(s Shape) algos.CostModel {
	return algos.CostModel{Overhead: time.Nanosecond, Beta: math.Inf(1), ChunkBytes: s.ChunkBytes, Cores: s.Cores, EagerBytes: s.EagerBytes,
		Polls: s.Polls}
}

// coefficients returns how much of p's predicted time each parameter buys: seconds per
// second of Call, Alpha, Overhead and Async, and per 1/(1 GB/s) of Beta and Gamma. They
// come from algos.CostModel.Predict itself, one parameter at a time, so the fit always
// matches the selector's formulas, whatever they are (they are linear in these six).
func coefficients(p Point, kind transport.Kind, world int, s Shape) ([nParams]float64, error) {
	const gbps = 1e9
	var unit [nParams]algos.CostModel
	for i := range unit {
		unit[i] = tiny(s)
	}
	unit[pCall].Call = time.Second
	unit[pAlpha].Alpha = time.Second
	unit[pOverhead].Overhead = time.Second
	unit[pAsync].Async = time.Second
	unit[pBeta].Beta = gbps
	unit[pGamma].Gamma = gbps
	var c [nParams]float64
	base, err := tiny(s).Predict(p.Algo, kind, p.Bytes, world)
	if err != nil {
		return c, err
	}
	for i, m := range unit {
		d, err := m.Predict(p.Algo, kind, p.Bytes, world)
		if err != nil {
			return c, err
		}
		c[i] = (d - base).Seconds()
	}
	return c, nil
}

// Set is the samples of one world size.
type Set struct {
	World  int     `json:"world"`
	Points []Point `json:"points"`
}

// Fit finds the non-negative Call, Alpha, Overhead, Async, 1/Beta and 1/Gamma that
// predict pts (AllReduce over world ranks of the given shape) with the least sum of
// squared relative errors, and reports the worst relative error. It needs points of at
// least two sizes; more algorithms separate the per-hop from the per-message terms (a
// ring and a naive AllReduce of the same size differ in hops and in messages), and
// sizes on both sides of algos.EagerBytes give Async.
func Fit(pts []Point, world int, s Shape) (algos.CostModel, float64, error) {
	return FitSets([]Set{{World: world, Points: pts}}, s)
}

// FitSets is Fit over samples taken at several world sizes on one host: one model for
// all of them, which is what a communicator of any size on that host uses (the built-in
// models are such fits, of 2, 3 and 4 ranks). Where the sets hold both worlds of at
// most s.Cores ranks and worlds of more, each kind gets a fit of its own, the second as
// the model's Crowded terms (algos.CostModel.Crowded): a rank with a core of its own
// and ranks that share cores are two machines, which one set of terms fits badly.
func FitSets(sets []Set, s Shape) (algos.CostModel, float64, error) {
	var own, crowded []Set
	for _, set := range sets {
		if s.Cores > 0 && set.World > s.Cores {
			crowded = append(crowded, set)
		} else {
			own = append(own, set)
		}
	}
	if len(own) == 0 || len(crowded) == 0 {
		return fitTerms(sets, s)
	}
	c, worstCrowded, err := fitTerms(crowded, s)
	if err != nil {
		return algos.CostModel{}, 0, fmt.Errorf("%w (worlds of more than %d ranks, sharing the cores)", err, s.Cores)
	}
	m, worst, err := fitTerms(own, s, splitOf(own, c)...)
	if err != nil {
		return algos.CostModel{}, 0, fmt.Errorf("%w (worlds of at most %d ranks, a core each)", err, s.Cores)
	}
	m.Crowded = &c
	return m, max(worst, worstCrowded), nil
}

// splitOf is how a fit of own divides a hop's latency between Alpha and Overhead:
// freely (nothing) when own has a world of 3 or more, else as c divides it. Two ranks
// cannot tell the two apart: every AllReduce of theirs, whatever the algorithm, costs
// Alpha + 2 Overhead per dependent hop (a send and a receive), so a fit may put it all
// in either, and a world of 64 would then price naive's root, which handles 126
// messages after 2 hops, as free (Overhead 0) or as 63 hops' worth (Alpha 0). Crowded
// worlds separate them (naive's root at 3 ranks takes two messages in one hop).
func splitOf(own []Set, c algos.CostModel) []float64 {
	for _, set := range own {
		if set.World > 2 {
			return nil
		}
	}
	a, o := c.Alpha.Seconds(), c.Overhead.Seconds()
	if !(a+o > 0) {
		return nil
	}
	return []float64{a / (a + o), o / (a + o)}
}

// fitTerms fits one set of terms to every sample of sets. With split (Alpha's and
// Overhead's shares, see splitOf) the two are fitted as one latency divided that way.
func fitTerms(sets []Set, s Shape, split ...float64) (algos.CostModel, float64, error) {
	var rows [][nParams]float64
	sizes := map[int]bool{}
	for _, set := range sets {
		if set.World < 2 {
			return algos.CostModel{}, 0, fmt.Errorf("tune: %w: fitting needs a world of 2 or more ranks, got %d", transport.ErrInvalid, set.World)
		}
		for _, p := range set.Points {
			if !(p.Seconds > 0) || p.Bytes < 0 {
				return algos.CostModel{}, 0, fmt.Errorf("tune: %w: sample %s at %d bytes over %d ranks took %v s; want a positive time",
					transport.ErrInvalid, p.Algo, p.Bytes, set.World, p.Seconds)
			}
			c, err := coefficients(p, transport.KindAllReduce, set.World, s)
			if err != nil {
				return algos.CostModel{}, 0, fmt.Errorf("tune: sample %s at %d bytes: %w", p.Algo, p.Bytes, err)
			}
			for i := range c {
				c[i] /= p.Seconds // relative error: each row's target becomes 1
			}
			if split != nil { // one column for the latency, in Alpha's place
				c[pAlpha], c[pOverhead] = split[0]*c[pAlpha]+split[1]*c[pOverhead], 0
			}
			rows = append(rows, c)
			sizes[p.Bytes] = true
		}
	}
	if len(sizes) < 2 {
		return algos.CostModel{}, 0, fmt.Errorf("tune: %w: fitting needs samples of at least 2 sizes, got %d", transport.ErrInvalid, len(sizes))
	}
	x, ok := nnls(rows, pBeta)
	if !ok || !(x[pBeta] > 0) {
		return algos.CostModel{}, 0, fmt.Errorf("tune: %w: the samples fit no model with a finite bandwidth (are the times from one communicator?)", transport.ErrInvalid)
	}
	worst := 0.0
	for _, r := range rows {
		worst = math.Max(worst, math.Abs(dot(r, x)-1))
	}
	if split != nil {
		x[pAlpha], x[pOverhead] = split[0]*x[pAlpha], split[1]*x[pAlpha]
	}
	dur := func(sec float64) time.Duration { return time.Duration(math.Round(sec * 1e9)) }
	m := algos.CostModel{Call: dur(x[pCall]), Alpha: dur(x[pAlpha]), Overhead: dur(x[pOverhead]), Async: dur(x[pAsync]),
		Beta: 1e9 / x[pBeta], ChunkBytes: s.ChunkBytes, Cores: s.Cores, EagerBytes: s.EagerBytes, Polls: s.Polls}
	if m.Overhead <= 0 {
		m.Overhead = time.Nanosecond // measured as negligible, not "unset" (which means Alpha/8)
	}
	if x[pGamma] > 0 {
		m.Gamma = 1e9 / x[pGamma]
	}
	return m, worst, nil
}

func dot(r, x [nParams]float64) float64 {
	s := 0.0
	for i := range r {
		s += r[i] * x[i]
	}
	return s
}

// nnls solves min ||A x - 1||^2 subject to x >= 0 and x[need] > 0 by trying every set
// of free variables that includes need and keeping the best feasible solution: 2^5
// small systems, exact, and fast enough for a few hundred samples. (Without the
// condition on need, a link whose every cost grows with the bytes may be fitted as a
// free wire and a slow reduction, which leaves Beta undefined.)
func nnls(in [][nParams]float64, need int) ([nParams]float64, bool) {
	// Scale every column to a maximum of 1: the time columns are ~1e5 times the byte
	// columns and would otherwise dominate the normal equations' rounding.
	var scale [nParams]float64
	for _, r := range in {
		for i := range r {
			scale[i] = math.Max(scale[i], math.Abs(r[i]))
		}
	}
	rows := make([][nParams]float64, len(in))
	for n, r := range in {
		for i := range r {
			if scale[i] > 0 {
				rows[n][i] = r[i] / scale[i]
			}
		}
	}
	best, bestErr, found := [nParams]float64{}, math.Inf(1), false
	for mask := 1; mask < 1<<nParams; mask++ {
		if mask&(1<<need) == 0 {
			continue
		}
		var idx []int
		for i := range nParams {
			if mask&(1<<i) != 0 && scale[i] > 0 {
				idx = append(idx, i)
			}
		}
		k := len(idx)
		var ata [nParams][nParams]float64
		var atb [nParams]float64
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
		var x [nParams]float64
		feasible := true
		for i := range k {
			if sol[i] < 0 || (idx[i] == need && sol[i] == 0) {
				feasible = false
			}
			x[idx[i]] = sol[i]
		}
		if !feasible || x[need] == 0 {
			continue
		}
		e := 0.0
		for _, r := range rows {
			d := dot(r, x) - 1
			e += d * d
		}
		if e < bestErr*(1-1e-12) {
			best, bestErr, found = x, e, true
		}
	}
	for i := range best {
		if scale[i] > 0 {
			best[i] /= scale[i]
		} else {
			best[i] = 0
		}
	}
	return best, found
}

// solve does Gaussian elimination with partial pivoting on the leading k x k system.
func solve(a [nParams][nParams]float64, b [nParams]float64, k int) ([nParams]float64, bool) {
	for col := range k {
		p := col
		for r := col + 1; r < k; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if math.Abs(a[p][col]) < 1e-12 {
			return b, false // singular: this set of free variables is not identifiable
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
	var x [nParams]float64
	for r := k - 1; r >= 0; r-- {
		s := b[r]
		for c := r + 1; c < k; c++ {
			s -= a[r][c] * x[c]
		}
		x[r] = s / a[r][r]
	}
	return x, true
}
