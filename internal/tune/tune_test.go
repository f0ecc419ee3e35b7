package tune_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/internal/tune"
	"github.com/goccl/goccl/transport"
)

// params is a model written out independently of package algos, to generate samples
// from: per call, per hop and per pipelined hop (both stretched by W/cores when ranks
// outnumber cores), per message at the busiest rank, per byte on the wire and reduced.
type params struct {
	call, alpha, overhead, async, beta, gamma float64
	cores                                     int
	polls                                     bool // waiting ranks poll: the busiest rank's messages stretch too
}

const eager, chunk = 16 << 10, 512 << 10

func chunksOf(n float64) float64 { return max(1, math.Ceil(n/chunk)) }

// hop is one dependent hop; load the bytes term, the busiest rank's bytes or all
// ranks' spread over the cores, whichever is longer, and the messages term likewise,
// with the busiest rank's messages stretched by W/cores when ranks outnumber cores and
// waiting ranks poll.
func (p params) hop(w int, pipelined bool) float64 {
	h := p.alpha
	if pipelined {
		h += p.async
	}
	if p.cores > 0 && w > p.cores {
		h *= float64(w) / float64(p.cores)
	}
	return h
}

func (p params) load(w int, msgs, msgsAll, wire, wireAll, red, redAll float64) float64 {
	if p.cores > 0 && w > p.cores {
		c := float64(p.cores)
		if p.polls {
			msgs *= float64(w) / c
		}
		msgs, wire, red = max(msgs, msgsAll/c), max(wire, wireAll/c), max(red, redAll/c)
	}
	return msgs*p.overhead + wire/p.beta + red/p.gamma
}

// ringTime: two ranks with a small buffer swap it in one hop; otherwise reduce-scatter
// and all-gather, 2(W-1) hops, each a send and a receive of a segment n/W; with polling
// ranks on fewer cores, its serial steps (segments within the eager size) wait for the
// core with the most ranks.
func ringTime(p params, n, w int) float64 {
	nf, wf := float64(n), float64(w)
	if w == 2 && n <= eager {
		return p.call + p.hop(w, false) + p.load(w, 2, 4, nf, 2*nf, nf, 2*nf)
	}
	seg := nf / wf
	msgs := 4 * (wf - 1) * chunksOf(seg) // a send and a receive per step, at every rank
	// Every rank works in every serial step, so the ranks stay on their cores: each step
	// waits for the fullest core, and all ranks' bytes count as that core's ranks times
	// the cores.
	slots := wf
	if p.cores > 0 && w > p.cores && seg <= eager {
		c := float64(p.cores)
		slots = math.Ceil(wf/c) * c
	}
	return p.call + 2*(wf-1)*p.hop(w, seg > eager) + p.load(w, msgs, wf*msgs, 2*(wf-1)*seg, 2*(wf-1)*seg*slots, (wf-1)*seg, (wf-1)*seg*slots)
}

// naiveTime: in to the root and out again, 2 hops; the root handles 2(W-1) messages,
// after a leaf's send and before its receive, and receives, reduces and sends W-1
// whole buffers.
func naiveTime(p params, n, w int) float64 {
	nf, wf := float64(n), float64(w)
	msgs := 2 * (wf - 1) * chunksOf(nf) // the root's; every message has a leaf at its other end
	return p.call + 2*p.hop(w, n > eager) + p.load(w, msgs+2, 2*msgs, (wf-1)*nf, 2*(wf-1)*nf, (wf-1)*nf, (wf-1)*nf)
}

// rdTime for W = 2, 3, 4: a direct exchange (1 hop, W-1 buffers in and out, in
// lockstep where polling ranks outnumber the cores) for small buffers, else recursive
// doubling: one exchange for 2, and for 3 an exchange between ranks 0 and 1 with rank 2
// folded in and out (3 hops); for 4, recursive halving and doubling: 4 hops, halves
// then quarters of the buffer each way (3/4 of it in each half), the work stretched by
// W/cores where polling ranks outnumber the cores.
func rdTime(p params, n, w int) float64 {
	nf, wf := float64(n), float64(w)
	if n <= eager {
		// One step of every rank at once: with polling ranks on fewer cores, all ranks'
		// bytes count as the fullest core's ranks times the cores, as in the ring's steps.
		slots := wf
		if p.polls && p.cores > 0 && w > p.cores {
			c := float64(p.cores)
			slots = math.Ceil(wf/c) * c
		}
		return p.call + p.hop(w, false) + p.load(w, 2*(wf-1), 2*wf*(wf-1), (wf-1)*nf, slots*(wf-1)*nf, (wf-1)*nf, slots*(wf-1)*nf)
	}
	if w == 4 {
		msgs := 4 * (chunksOf(nf/2) + chunksOf(nf/4))
		work := p.load(w, msgs, 4*msgs, 1.5*nf, 6*nf, 0.75*nf, 3*nf)
		if p.polls && p.cores > 0 && w > p.cores {
			work *= wf / float64(p.cores)
		}
		return p.call + 4*p.hop(w, nf/2 > eager) + work
	}
	// {hops, buffers sent by the busiest rank, buffers sent by all, buffers reduced by all}
	s := map[int][4]float64{2: {1, 1, 2, 2}, 3: {3, 2, 4, 3}}[w]
	ch := chunksOf(nf)
	return p.call + s[0]*p.hop(w, true) + p.load(w, 2*s[1]*ch, 2*s[2]*ch, s[1]*nf, s[2]*nf, s[1]*nf, s[3]*nf)
}

var sizes = []int{8, 100, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20}

func samples(p params, w int, noise func(i int) float64) []tune.Point {
	var pts []tune.Point
	for i, n := range sizes {
		pts = append(pts,
			tune.Point{Algo: "ring", Bytes: n, Seconds: ringTime(p, n, w) * noise(3*i)},
			tune.Point{Algo: "naive", Bytes: n, Seconds: naiveTime(p, n, w) * noise(3*i+1)},
			tune.Point{Algo: "rd", Bytes: n, Seconds: rdTime(p, n, w) * noise(3*i+2)})
	}
	return pts
}

func TestFitRecoversModel(t *testing.T) {
	exact := func(int) float64 { return 1 }
	for _, tc := range []struct {
		name  string
		p     params
		world int
	}{
		{"shm-like w2", params{3e-6, 2e-6, 0.5e-6, 30e-6, 6e9, 8e9, 0, false}, 2},
		{"tcp-like w4", params{5e-6, 30e-6, 3e-6, 60e-6, 1.2e9, 6e9, 0, false}, 4},
		{"slow w3", params{1e-4, 1e-3, 1e-4, 1e-3, 1e8, 1e9, 0, false}, 3},
		{"oversubscribed w4 on 2 cores", params{2e-6, 10e-6, 2e-6, 40e-6, 4e9, 5e9, 2, false}, 4},
		{"oversubscribed w3 on 2 cores", params{2e-6, 10e-6, 2e-6, 40e-6, 4e9, 5e9, 2, false}, 3},
		{"oversubscribed w4 on 2 cores, polling", params{2e-6, 10e-6, 2e-6, 40e-6, 4e9, 5e9, 2, true}, 4},
		{"oversubscribed w3 on 2 cores, polling", params{2e-6, 10e-6, 2e-6, 40e-6, 4e9, 5e9, 2, true}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pts := samples(tc.p, tc.world, exact)
			m, worst, err := tune.Fit(pts, tc.world, tune.Shape{Cores: tc.p.cores, Polls: tc.p.polls})
			require.NoError(t, err)
			require.Less(t, worst, 0.01, "the samples follow the model exactly")
			require.InEpsilon(t, tc.p.call, m.Call.Seconds(), 0.02, "call")
			require.InEpsilon(t, tc.p.alpha, m.Alpha.Seconds(), 0.02, "alpha")
			require.InEpsilon(t, tc.p.overhead, m.Overhead.Seconds(), 0.02, "overhead")
			require.InEpsilon(t, tc.p.async, m.Async.Seconds(), 0.02, "async")
			require.InEpsilon(t, tc.p.beta, m.Beta, 0.02, "beta")
			require.InEpsilon(t, tc.p.gamma, m.Gamma, 0.02, "gamma")
			require.Equal(t, tc.p.cores, m.Cores)
			// The fitted model predicts every sample, as the selector would use it.
			for _, p := range pts {
				d, err := m.Predict(p.Algo, transport.KindAllReduce, p.Bytes, tc.world)
				require.NoError(t, err)
				require.InEpsilon(t, p.Seconds, d.Seconds(), 0.02, "%s at %d bytes", p.Algo, p.Bytes)
			}
		})
	}
}

// TestFitSplitsCrowded: samples of 2 ranks with a core each and of 3 and 4 ranks on 2
// cores, drawn from two different machines, give the first as the model's terms and the
// second as its Crowded terms, and the model predicts every sample. Two ranks cannot
// separate the hop from the message (every AllReduce of theirs costs alpha + 2 overhead
// per hop), so the fit divides that latency as the crowded terms do: where the own
// machine divides it alike, all its terms come back; where not, the sum comes back and
// every sample is still predicted.
func TestFitSplitsCrowded(t *testing.T) {
	exact := func(int) float64 { return 1 }
	crowded := params{4e-6, 12e-6, 3e-6, 50e-6, 3e9, 6e9, 2, true}
	for _, tc := range []struct {
		name string
		own  params
		same bool // own divides its latency as crowded does
	}{
		{"alike", params{0.5e-6, 0.8e-6, 0.2e-6, 5e-6, 9e9, 12e9, 2, true}, true},
		{"otherwise", params{0.5e-6, 0.1e-6, 0.6e-6, 5e-6, 9e9, 12e9, 2, true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets := []tune.Set{{World: 2, Points: samples(tc.own, 2, exact)}}
			for _, w := range []int{3, 4} {
				sets = append(sets, tune.Set{World: w, Points: samples(crowded, w, exact)})
			}
			m, worst, err := tune.FitSets(sets, tune.Shape{Cores: 2, Polls: true})
			require.NoError(t, err)
			require.Less(t, worst, 0.01)
			require.NotNil(t, m.Crowded)
			c := *m.Crowded
			for _, x := range []struct {
				name      string
				want, got float64
			}{{"crowded call", crowded.call, c.Call.Seconds()}, {"crowded alpha", crowded.alpha, c.Alpha.Seconds()},
				{"crowded overhead", crowded.overhead, c.Overhead.Seconds()}, {"crowded async", crowded.async, c.Async.Seconds()},
				{"crowded beta", crowded.beta, c.Beta}, {"crowded gamma", crowded.gamma, c.Gamma},
				{"call", tc.own.call, m.Call.Seconds()}, {"beta", tc.own.beta, m.Beta}, {"gamma", tc.own.gamma, m.Gamma},
				{"latency per hop", tc.own.alpha + 2*tc.own.overhead, (m.Alpha + 2*m.Overhead).Seconds()},
				{"alpha / overhead", crowded.alpha / crowded.overhead, float64(m.Alpha) / float64(m.Overhead)},
			} {
				require.InEpsilon(t, x.want, x.got, 0.02, x.name)
			}
			if tc.same {
				require.InEpsilon(t, tc.own.alpha, m.Alpha.Seconds(), 0.02, "alpha")
				require.InEpsilon(t, tc.own.overhead, m.Overhead.Seconds(), 0.02, "overhead")
			}
			for _, set := range sets {
				for _, p := range set.Points {
					d, err := m.Predict(p.Algo, transport.KindAllReduce, p.Bytes, set.World)
					require.NoError(t, err)
					require.InEpsilon(t, p.Seconds, d.Seconds(), 0.02, "%d ranks, %s at %d bytes", set.World, p.Algo, p.Bytes)
				}
			}
		})
	}
	// A host with a core per rank has one machine: one set of terms, as before.
	p := crowded
	p.cores = 0
	sets := []tune.Set{{World: 2, Points: samples(p, 2, exact)}, {World: 3, Points: samples(p, 3, exact)}}
	m, _, err := tune.FitSets(sets, tune.Shape{Cores: 4, Polls: true})
	require.NoError(t, err)
	require.Nil(t, m.Crowded)
	require.InEpsilon(t, p.alpha, m.Alpha.Seconds(), 0.02)
	require.InEpsilon(t, p.overhead, m.Overhead.Seconds(), 0.02)
}

// TestFitNoisy: +-5% noise on every sample still predicts every sample within 15%, and
// the terms that dominate somewhere (alpha at 8 B, beta at 64 MiB) within 25%.
func TestFitNoisy(t *testing.T) {
	p := params{2e-6, 10e-6, 1e-6, 40e-6, 2e9, 5e9, 0, false}
	const w = 3
	noise := func(i int) float64 { return 1 + 0.05*math.Sin(float64(i*7+1)) } // deterministic, both signs
	pts := samples(p, w, noise)
	m, worst, err := tune.Fit(pts, w, tune.Shape{})
	require.NoError(t, err)
	require.Less(t, worst, 0.15)
	require.InEpsilon(t, p.beta, m.Beta, 0.25)
	small, err := m.Predict("ring", transport.KindAllReduce, 8, w)
	require.NoError(t, err)
	require.InEpsilon(t, ringTime(p, 8, w), small.Seconds(), 0.15)
}

func TestFitRejects(t *testing.T) {
	ok := []tune.Point{{Algo: "ring", Bytes: 8, Seconds: 1e-5}, {Algo: "ring", Bytes: 1 << 20, Seconds: 1e-3}}
	for _, tc := range []struct {
		name  string
		pts   []tune.Point
		world int
		want  string
	}{
		{"one rank", ok, 1, "world of 2 or more"},
		{"one size", ok[:1], 2, "at least 2 sizes"},
		{"zero time", []tune.Point{ok[0], {Algo: "ring", Bytes: 64, Seconds: 0}}, 2, "positive time"},
		{"unknown algorithm", []tune.Point{ok[0], {Algo: "bogus", Bytes: 64, Seconds: 1}}, 2, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tune.Fit(tc.pts, tc.world, tune.Shape{})
			require.ErrorIs(t, err, transport.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "models.json")
	shm := algos.CostModel{Call: 700 * time.Nanosecond, Alpha: 1500 * time.Nanosecond, Overhead: 300 * time.Nanosecond,
		Async: 25 * time.Microsecond, Beta: 6e9, Gamma: 9e9, Cores: 2, Polls: true,
		Crowded: &algos.CostModel{Call: time.Microsecond, Alpha: 3 * time.Microsecond, Overhead: 800 * time.Nanosecond,
			Async: 60 * time.Microsecond, Beta: 4e9, Gamma: 8e9}}
	f := tune.NewFile(tune.Models{"shm": shm, "tcp": {Alpha: 20 * time.Microsecond, Beta: 1e9}}, 4)
	require.NoError(t, tune.Save(path, f))
	got, err := tune.Load(path)
	require.NoError(t, err)
	require.Equal(t, 4, got.World)
	ms := got.CostModels()
	require.Equal(t, 1500*time.Nanosecond, ms["shm"].Alpha)
	require.Equal(t, 6e9, ms["shm"].Beta)
	require.Equal(t, 9e9, ms["shm"].Gamma)
	require.Equal(t, 1e9, ms["tcp"].Beta)
	require.Equal(t, shm, ms["shm"], "every field survives the file")

	// A version-1 file (three parameters) still loads; the new terms read as zero.
	v1 := filepath.Join(dir, "v1.json")
	require.NoError(t, os.WriteFile(v1, []byte(`{"version": 1, "world": 2, "models": {"shm": {"alpha_ns": 1000, "beta_bytes_per_s": 1e9, "gamma_bytes_per_s": 0}}}`), 0o644))
	old, err := tune.Load(v1)
	require.NoError(t, err)
	require.Equal(t, algos.CostModel{Alpha: time.Microsecond, Beta: 1e9, Polls: true}, old.CostModels()["shm"])

	bad := map[string]string{
		"version":     `{"version": 7, "world": 2, "models": {"shm": {"alpha_ns": 1, "beta_bytes_per_s": 1e9, "gamma_bytes_per_s": 0}}}`,
		"beta":        `{"version": 1, "world": 2, "models": {"shm": {"alpha_ns": 1, "beta_bytes_per_s": 0, "gamma_bytes_per_s": 0}}}`,
		"alpha_ns":    `{"version": 1, "world": 2, "models": {"tcp": {"alpha_ns": -5, "beta_bytes_per_s": 1e9, "gamma_bytes_per_s": 0}}}`,
		"overhead_ns": `{"version": 2, "world": 2, "models": {"tcp": {"alpha_ns": 5, "overhead_ns": -1, "beta_bytes_per_s": 1e9}}}`,
		"cores":       `{"version": 2, "world": 2, "models": {"tcp": {"alpha_ns": 5, "cores": -2, "beta_bytes_per_s": 1e9}}}`,
		"crowded":     `{"version": 3, "world": 2, "models": {"shm": {"alpha_ns": 5, "beta_bytes_per_s": 1e9, "crowded": {"alpha_ns": 5, "beta_bytes_per_s": -1}}}}`,
		"unknown":     `{"version": 1, "world": 2, "modles": {}}`,
		"no models":   `{"version": 1, "world": 2, "models": {}}`,
	}
	for want, body := range bad {
		p := filepath.Join(dir, want+".json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, err := tune.Load(p)
		require.ErrorIs(t, err, transport.ErrInvalid, want)
		require.ErrorContains(t, err, want)
		require.ErrorContains(t, err, p)
	}
	_, err = tune.Load(filepath.Join(dir, "missing.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestCalibrate runs the quick calibration on goroutine ranks over inmem and checks
// what can be checked of a measurement: every rank got the same samples and model, a
// sample per algorithm and size, a usable model, and the algorithm spec restored.
func TestCalibrate(t *testing.T) {
	for _, world := range []int{2, 3} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		comms, err := goccl.InitLocal(ctx, world)
		require.NoError(t, err)
		defer func() {
			for _, c := range comms {
				c.Close()
			}
		}()
		opts := tune.Options{Quick: true, PerPoint: 2 * time.Millisecond, MaxIters: 20}
		res := make([]tune.Result, world)
		errs := make([]error, world)
		var wg sync.WaitGroup
		for r, c := range comms {
			wg.Go(func() { res[r], errs[r] = tune.Calibrate(ctx, c, opts) })
		}
		wg.Wait()
		for r := range world {
			require.NoError(t, errs[r], "rank %d", r)
			require.Equal(t, res[0], res[r], "rank %d disagrees with rank 0", r)
		}
		require.Equal(t, "inmem", res[0].Transport)
		require.Len(t, res[0].Samples, 4*3, "4 sizes x ring, naive, rd")
		m := res[0].Models["inmem"]
		require.Greater(t, m.Beta, 0.0)
		require.GreaterOrEqual(t, m.Alpha, time.Duration(0))
		f := res[0].File()
		require.Equal(t, world, f.World)
		require.Len(t, f.Samples["inmem"], 12)
		require.Nil(t, res[0].Staged, "staged is timed over shm only")
		require.Empty(t, f.Staged)
		name, why := comms[0].Algo(goccl.KindAllReduce, 1<<20)
		require.NotEmpty(t, name)
		require.Contains(t, why, "auto")
	}
}

// TestCalibrateShm: over shm the calibration also times staged, at the sizes auto may
// stage, and every rank files the same staged range.
func TestCalibrateShm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comms, err := goccl.InitLocal(ctx, 2, goccl.WithTransport("shm"))
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	opts := tune.Options{Quick: true, PerPoint: 2 * time.Millisecond, MaxIters: 20}
	res := make([]tune.Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() { res[r], errs[r] = tune.Calibrate(ctx, c, opts) })
	}
	wg.Wait()
	for r := range 2 {
		require.NoError(t, errs[r], "rank %d", r)
		require.Equal(t, res[0], res[r], "rank %d disagrees with rank 0", r)
	}
	require.Equal(t, "shm", res[0].Transport)
	require.Len(t, res[0].Samples, 4*3, "staged is not among the fitted samples")
	require.NotNil(t, res[0].Staged)
	st := *res[0].Staged
	require.Equal(t, 2, st.World)
	require.Len(t, st.Samples, 3, "staged at 8K, 64K and 1M, the quick sizes above 1 KiB")
	for _, p := range st.Samples {
		require.Equal(t, tune.StagedAlgo, p.Algo)
		require.Greater(t, p.Seconds, 0.0)
	}
	// Staged against what auto's fitted model runs at each size, not the fastest; where
	// the model picks an algorithm that was not timed (the fit of a few noisy samples
	// may favour the tree somewhere), against every algorithm timed at that size.
	timed := map[tune.Point]bool{}
	for _, p := range res[0].Samples {
		timed[tune.Point{Algo: p.Algo, Bytes: p.Bytes}] = true
	}
	var picks []tune.Point
	sizes := map[int]bool{}
	for _, p := range res[0].Samples {
		a, _, err := algos.Resolve(algos.Auto, transport.KindAllReduce, p.Bytes, 2, res[0].Models["shm"])
		require.NoError(t, err)
		if a.Name() == p.Algo || !timed[tune.Point{Algo: a.Name(), Bytes: p.Bytes}] {
			picks = append(picks, p)
			sizes[p.Bytes] = true
		}
	}
	require.Len(t, sizes, 4, "a pick at every size")
	require.Equal(t, tune.FitStaged(2, st.Samples, picks), st)
	for r, c := range comms {
		require.Positive(t, c.Stats().ByAlgo["staged"].Calls, "rank %d ran staged itself, not a fallback", r)
	}
}

type fakeComm struct {
	rank, size int
	links      []string
}

func (f fakeComm) Rank() int                   { return f.rank }
func (f fakeComm) Size() int                   { return f.size }
func (f fakeComm) TransportOf(peer int) string { return f.links[peer] }
func (f fakeComm) SetAlgo(string) error        { return nil }
func (f fakeComm) AllReduce(context.Context, transport.Buffer, transport.Buffer, int, transport.DType, transport.Op) error {
	return nil
}

func TestCalibrateRejects(t *testing.T) {
	ctx := context.Background()
	_, err := tune.Calibrate(ctx, fakeComm{rank: 0, size: 1, links: []string{"self"}}, tune.Options{})
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "at least 2 ranks")
	_, err = tune.Calibrate(ctx, fakeComm{rank: 0, size: 3, links: []string{"self", "shm", "tcp"}}, tune.Options{})
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "one transport")
	_, err = tune.Calibrate(ctx, fakeComm{rank: 0, size: 2, links: []string{"self", "shm"}}, tune.Options{Sizes: []int{6}})
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "6 bytes")
}

// TestRefit fits one model to samples of three world sizes generated from one set of
// parameters, and gets those parameters back; a file without samples is refused.
func TestRefit(t *testing.T) {
	p := params{2e-6, 8e-6, 1e-6, 30e-6, 5e9, 9e9, runtime.NumCPU(), true}
	var files []tune.File
	for _, w := range []int{2, 3, 4} {
		f := tune.NewFile(tune.Models{"shm": {Alpha: time.Second, Beta: 1}}, w) // the old model is ignored
		f.Samples = map[string][]tune.Point{"shm": samples(p, w, func(int) float64 { return 1 })}
		files = append(files, f)
	}
	joint, err := tune.Refit(files)
	require.NoError(t, err)
	require.Equal(t, []int{2, 3, 4}, joint.Worlds)
	m := joint.CostModels()["shm"]
	require.InEpsilon(t, p.alpha, m.Alpha.Seconds(), 0.02)
	require.InEpsilon(t, p.async, m.Async.Seconds(), 0.02)
	require.InEpsilon(t, p.beta, m.Beta, 0.02)
	require.Less(t, joint.Models["shm"].FitError, 0.01)
	require.NoError(t, tune.Save(filepath.Join(t.TempDir(), "joint.json"), joint))

	_, err = tune.Refit([]tune.File{tune.NewFile(tune.Models{"shm": algos.ShmModel}, 2)})
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "no samples")
}

// TestModelFor: the communicator's model is shm's inside a host and tcp's across, a
// tuned model replaces the built-in one of its transport only, and the host-local
// model knows this host's cores.
func TestModelFor(t *testing.T) {
	one := []string{"h", "h", "h"}
	m := tune.ModelFor([]string{"self", "shm", "shm"}, one, 0, 0, nil)
	want := algos.ShmModel
	want.Cores = runtime.NumCPU()
	require.Equal(t, want, m)
	m = tune.ModelFor([]string{"tcp", "self", "tcp"}, one, 1, 1<<20, nil)
	want = algos.TCPModel
	want.Cores, want.ChunkBytes = runtime.NumCPU(), 1<<20
	require.Equal(t, want, m, "tcp on one host: tcp's model, sharing the cores")
	tuned := tune.Models{"shm": {Alpha: 3 * time.Microsecond, Beta: 7e9}}
	m = tune.ModelFor([]string{"self", "shm", "shm"}, one, 0, 0, tuned)
	require.Equal(t, 3*time.Microsecond, m.Alpha)
	require.Equal(t, runtime.NumCPU(), m.Cores)
	// Two hosts of two: shm inside, tcp between, with the layout.
	m = tune.ModelFor([]string{"self", "shm", "tcp", "tcp"}, []string{"a", "a", "b", "b"}, 0, 0, tuned)
	require.Equal(t, 2, m.PerHost)
	require.NotNil(t, m.Inter)
	require.Equal(t, algos.TCPModel.Alpha, m.Inter.Alpha)
	require.Equal(t, 3*time.Microsecond, m.Alpha)
}

// TestFitStaged: staged's range is the run of sizes without a loss (by more than 5 %)
// that holds the most wins (by more than 5 %), ties inside it or at its ends included,
// with its ends at the geometric means of the neighbouring sizes, open at the top when
// it reaches the largest; sizes up to 1 KiB and sizes the others lack do not count.
func TestFitStaged(t *testing.T) {
	pt := func(algo string, n int, us float64) tune.Point {
		return tune.Point{Algo: algo, Bytes: n, Seconds: us * 1e-6}
	}
	// ring at every size; at 1M naive is faster than the ring.
	others := []tune.Point{pt("ring", 512, 2), pt("ring", 4<<10, 5), pt("ring", 64<<10, 30), pt("ring", 1<<20, 400),
		pt("naive", 1<<20, 300), pt("ring", 16<<20, 6000), pt("ring", 64<<20, 24000)}
	cases := []struct {
		name     string
		staged   []float64 // µs at 4K, 64K, 1M, 16M, 64M
		off      bool
		min, max int
	}{
		// wins at 64K and 1M (against naive's 300): from sqrt(4K*64K)+1 to sqrt(1M*16M).
		{"middle", []float64{6, 20, 250, 7000, 26000}, false, 16<<10 + 1, 4 << 20},
		// the same, with 4K a tie (5 against the ring's 5): the run starts at the bottom.
		{"tie at the bottom", []float64{5, 20, 250, 7000, 26000}, false, 4 << 10, 4 << 20},
		// a tie at 1M (295 against 300) inside the run, and one at 64M (25000 against
		// 24000) at its top: from 16K+1 with no upper bound.
		{"ties inside", []float64{6, 20, 295, 5000, 25000}, false, 16<<10 + 1, 0},
		// a tie at 64K next to the win at 1M: the run reaches down to the loss at 4K.
		{"tie at an end", []float64{6, 29, 250, 7000, 26000}, false, 16<<10 + 1, 4 << 20},
		// two runs, [4K 64K] with one win and a tie, [16M 64M] with two wins: the second.
		{"most wins", []float64{4, 31, 350, 5000, 20000}, false, 4<<20 + 1, 0},
		{"top", []float64{6, 40, 350, 5000, 20000}, false, 4<<20 + 1, 0},
		{"bottom", []float64{4, 20, 350, 7000, 26000}, false, 4 << 10, 256 << 10},
		{"more wins", []float64{4, 40, 250, 5000, 20000}, false, 256<<10 + 1, 0},
		{"first of equal runs", []float64{4, 40, 280, 7000, 20000}, false, 4 << 10, 16 << 10},
		// a win at 1M between losses, then a run of ties to the top: no win there.
		{"ties alone", []float64{6, 40, 250, 7000, 24500}, false, 256<<10 + 1, 4 << 20},
		{"ties", []float64{4.9, 29, 290, 5800, 23000}, true, 0, 0},
		{"slower", []float64{9, 90, 900, 9000, 90000}, true, 0, 0},
	}
	sizes := []int{4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20}
	for _, tc := range cases {
		staged := []tune.Point{pt("staged", 512, 0.1), pt("staged", 3<<20, 1)} // never counted
		for i, us := range tc.staged {
			staged = append(staged, pt("staged", sizes[i], us))
		}
		r := tune.FitStaged(2, staged, others)
		require.Equal(t, tune.StagedRange{World: 2, Off: tc.off, MinBytes: tc.min, MaxBytes: tc.max, Samples: staged}, r, tc.name)
	}
	require.True(t, tune.FitStaged(3, nil, others).Off, "no staged samples")
}

// TestStagedRangeFile: a file's staged ranges survive Save and Load, Refit keeps them,
// and a range that cannot be right is refused with what was wrong.
func TestStagedRangeFile(t *testing.T) {
	dir := t.TempDir()
	f := tune.NewFile(tune.Models{"shm": algos.ShmModel}, 2)
	f.Samples = map[string][]tune.Point{"shm": samples(params{2e-6, 8e-6, 1e-6, 30e-6, 5e9, 9e9, 2, true}, 2, func(int) float64 { return 1 })}
	f.Staged = []tune.StagedRange{{World: 2, MinBytes: 65537, MaxBytes: 4 << 20, Samples: []tune.Point{{Algo: "staged", Bytes: 1 << 20, Seconds: 1e-4}}}}
	path := filepath.Join(dir, "staged.json")
	require.NoError(t, tune.Save(path, f))
	got, err := tune.Load(path)
	require.NoError(t, err)
	r, ok := got.StagedFor(2)
	require.True(t, ok)
	require.Equal(t, f.Staged[0], r)
	_, ok = got.StagedFor(3)
	require.False(t, ok)

	f3 := tune.NewFile(tune.Models{"shm": algos.ShmModel}, 3)
	f3.Samples = map[string][]tune.Point{"shm": samples(params{2e-6, 8e-6, 1e-6, 30e-6, 5e9, 9e9, 2, true}, 3, func(int) float64 { return 1 })}
	f3.Staged = []tune.StagedRange{{World: 3, Off: true}}
	joint, err := tune.Refit([]tune.File{got, f3})
	require.NoError(t, err)
	require.Equal(t, []tune.StagedRange{f.Staged[0], {World: 3, Off: true}}, joint.Staged)

	model := `"models": {"shm": {"alpha_ns": 1, "beta_bytes_per_s": 1e9}}`
	bad := map[string]string{
		"world=1":               `[{"world": 1, "min_bytes": 4096}]`,
		"min_bytes=0":           `[{"world": 2}]`,
		"max_bytes=1024 below":  `[{"world": 2, "min_bytes": 4096, "max_bytes": 1024}]`,
		"off with min_bytes=64": `[{"world": 2, "off": true, "min_bytes": 64}]`,
		"two for 2 ranks":       `[{"world": 2, "off": true}, {"world": 2, "min_bytes": 64}]`,
	}
	for want, staged := range bad {
		p := filepath.Join(dir, "bad.json")
		require.NoError(t, os.WriteFile(p, []byte(`{"version": 2, "world": 2, `+model+`, "staged": `+staged+`}`), 0o644))
		_, err := tune.Load(p)
		require.ErrorIs(t, err, transport.ErrInvalid, want)
		require.ErrorContains(t, err, want)
	}
}
