package goccl

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/staged"
	"github.com/goccl/goccl/internal/seeds"
	"github.com/goccl/goccl/transport/rendezvous"
)

// TestAlgoTunerSchedule drives one class by hand: its first calls run the model's pick
// untimed, then every candidate in turn for algoTrials rounds (the ranks agree after
// the last), then the choice, with one of the others every algoTryEvery-th call
// (agreeing after each), the others in turn; sizes below algoTuneMin, and a tuner that
// is off, are left alone.
func TestAlgoTunerSchedule(t *testing.T) {
	c := &Comm{size: 3, stageable: true, stagedMin: 16 << 20} // a staging area, not yet set up
	ring := withShmModel(t, c)
	require.Zero(t, c.algoBefore(1<<20, ring), "off: nothing tuned")
	c.algoTune.setSchedule(algoTuneMin, algoUntimed, algoTrials, algoTryEvery, algoBand)
	require.Zero(t, c.algoBefore(algoTuneMin-1, ring), "below algoTuneMin")

	const bytes = 1<<20 + 12
	cls := &c.algoTune.class[bits.Len(uint(bytes))]
	var got []int
	var agreed []int
	run := func(n int) {
		for range n {
			tr := c.algoBefore(bytes, ring)
			require.Same(t, cls, tr.cls)
			if tr.agree {
				agreed = append(agreed, int(cls.calls))
			}
			i := tr.i
			if !tr.timed {
				i = -1
			}
			got = append(got, i)
		}
	}
	run(1)
	k := len(cls.cands)
	require.GreaterOrEqual(t, k, 2, "the model prices staged within algoBand of the ring at 3 ranks, 1 MiB")
	require.Equal(t, "ring", cls.cands[0].Name(), "the pick comes first")
	run(algoUntimed + algoTrials*k - 1)
	want := []int{-1, -1}
	for j := range algoTrials * k {
		want = append(want, j%k)
	}
	require.Equal(t, want, got, "untimed calls of the pick, then every candidate in turn")
	require.Equal(t, []int{algoUntimed + algoTrials*k}, agreed, "the ranks agree after the last trial")

	t1 := make([]float64, k)
	for i := range t1 {
		t1[i] = 2
	}
	t1[k-1] = 1
	require.True(t, cls.settle(t1), "the last candidate is twice as fast")
	got, agreed = got[:0], agreed[:0]
	run(2 * k * algoTryEvery)
	start := algoUntimed + algoTrials*k
	var tried []int
	for i, j := range got {
		call := start + i + 1 // the class's call number
		if (call-start)%algoTryEvery == 0 {
			require.NotEqual(t, k-1, j, "call %d tries another candidate", call)
			tried = append(tried, j)
			continue
		}
		require.Equal(t, k-1, j, "call %d runs the choice", call)
	}
	for j := range k - 1 {
		require.Contains(t, tried, j, "every other candidate gets its tries")
	}
	require.Len(t, agreed, 2*k, "the ranks agree after every try")
	for i, n := range agreed {
		require.Equal(t, start+(i+1)*algoTryEvery, n)
	}
}

// withShmModel gives the hand-made communicator c an auto selector priced by the
// built-in shm model and returns the ring, the pick the tests pass.
func withShmModel(t *testing.T, c *Comm) algos.Algorithm {
	t.Helper()
	ring, err := algos.Lookup("ring")
	require.NoError(t, err)
	sel, err := newSelector("auto")
	require.NoError(t, err)
	sel.model = algos.ShmModel
	c.sel.Store(sel)
	return ring
}

// TestAlgoClassSettle: the choice moves to the fastest candidate only when it is under
// algoKeep of the choice's time, candidates not measured (0) are skipped, and a choice
// with no time of its own gives way to any measured one.
func TestAlgoClassSettle(t *testing.T) {
	cls := &algoClass{cands: make([]algos.Algorithm, 3)}
	require.False(t, cls.settle([]float64{1, 0.96, 0}), "within algoKeep: the choice stays")
	require.Zero(t, cls.choice)
	require.True(t, cls.settle([]float64{1, 0.96, 0.9}))
	require.Equal(t, 2, cls.choice)
	require.False(t, cls.settle([]float64{0, 0, 0}), "nothing measured")
	require.True(t, cls.settle([]float64{0.5, 0, 0}), "the choice has no time: the measured one wins")
	require.Zero(t, cls.choice)
}

// TestAlgoClassEstimate: the least of the last algoSamples times per byte, so that one
// call slowed by the host does not move it and a lasting slow-down does; calls of no
// bytes or no time are ignored.
func TestAlgoClassEstimate(t *testing.T) {
	cls := &algoClass{cands: make([]algos.Algorithm, 1), ns: make([][algoSamples]float64, 1), n: make([]int, 1)}
	require.Zero(t, cls.estimate(0))
	cls.record(0, 0, 100)
	cls.record(0, 100, 0)
	require.Zero(t, cls.estimate(0))
	cls.record(0, 1000, 2000)
	require.InDelta(t, 2.0, cls.estimate(0), 1e-12)
	cls.record(0, 1000, 100000)
	require.InDelta(t, 2.0, cls.estimate(0), 1e-12, "one slow call does not move it")
	cls.record(0, 1000, 4000)
	cls.record(0, 1000, 5000)
	require.InDelta(t, 4.0, cls.estimate(0), 1e-12, "three slower calls in a row do")
}

// TestAlgoTuneOnComm runs AllReduces with algo_tune online over shm (where staged is a
// candidate) and tcp at 3 ranks, at sizes in two tuned classes (odd element counts, not
// divisible by the world) and below algoTuneMin, interleaved, through the trials and
// past two tries, checking every result against a float64 sum. Every rank must have
// counted the same calls and agreed on the same choice, which Comm.Algo reports.
func TestAlgoTuneOnComm(t *testing.T) {
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const w = 3
			comms, err := InitLocal(ctx, w, WithTransport(tr), WithAlgoTune(AlgoTuneOnline))
			require.NoError(t, err)
			defer func() {
				for _, c := range comms {
					require.NoError(t, c.Close())
				}
			}()
			for _, c := range comms {
				require.True(t, c.algoTune.on, "rank %d", c.rank)
			}
			counts := []int{algoTuneMin/4 + 5, 1<<18 + 7, 1001, 0}
			calls := algoUntimed + algoTrials*4 + 2*algoTryEvery + 1
			for call := range calls {
				for _, count := range counts {
					errs := make(chan error, w)
					for _, c := range comms {
						go func() { errs <- allReduceChecked(ctx, c, count, call) }()
					}
					for range w {
						require.NoError(t, <-errs)
					}
				}
			}
			for _, count := range counts[:2] {
				bytes := 4 * count
				cls := &comms[0].algoTune.class[bits.Len(uint(bytes))]
				require.GreaterOrEqual(t, len(cls.cands), 2)
				name0, why0 := comms[0].Algo(KindAllReduce, bytes)
				require.Contains(t, why0, "algo_tune online", "the agreed choice is what Comm.Algo reports")
				for _, c := range comms {
					cc := &c.algoTune.class[bits.Len(uint(bytes))]
					require.EqualValues(t, calls, cc.calls, "rank %d counted every call", c.rank)
					require.Equal(t, cls.choice, cc.choice, "rank %d agreed with rank 0", c.rank)
					name, _ := c.Algo(KindAllReduce, bytes)
					require.Equal(t, name0, name, "rank %d", c.rank)
				}
			}
			require.Nil(t, comms[0].algoTune.agreed[bits.Len(uint(4*1001))].Load(), "below algoTuneMin nothing is tuned")
		})
	}
}

// allReduceChecked runs one in-place float32 AllReduce of count elements on c and
// compares every element with the sum of the ranks' inputs in float64.
func allReduceChecked(ctx context.Context, c *Comm, count, call int) error {
	x := make([]float32, count)
	in := func(r, i int) float64 { return float64(r*7 + i%113 + call%5) }
	for i := range x {
		x[i] = float32(in(c.rank, i))
	}
	if err := c.AllReduce(ctx, HostSlice(x), HostSlice(x), count, Float32, Sum); err != nil {
		return err
	}
	for i, got := range x {
		want := 0.0
		for r := range c.size {
			want += in(r, i)
		}
		if float64(got) != want {
			return fmt.Errorf("rank %d call %d count %d: element %d = %v, want %v", c.rank, call, count, i, got, want)
		}
	}
	return nil
}

// TestAlgoTuneNeedsEveryRank: when only some ranks' configs ask for algo_tune online,
// no rank tunes (the schedule must run on every rank alike), and AllReduces stay right.
func TestAlgoTuneNeedsEveryRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const w = 3
	store := rendezvous.NewMemStore()
	comms := make([]*Comm, w)
	errs := make([]error, w)
	var wg sync.WaitGroup
	for r := range w {
		wg.Go(func() {
			cfg := DefaultConfig().Apply(WithTransport("shm"), WithStore(store), WithRank(r, w), WithLocalRank(r, w))
			if r == 1 {
				cfg = cfg.Apply(WithAlgoTune(AlgoTuneOnline))
			}
			comms[r], errs[r] = Init(ctx, cfg)
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	defer func() {
		for _, c := range comms {
			require.NoError(t, c.Close())
		}
	}()
	for _, c := range comms {
		require.False(t, c.algoTune.on, "rank %d", c.rank)
	}
	for call := range algoUntimed + algoTrials*4 + 1 {
		ch := make(chan error, w)
		for _, c := range comms {
			go func() { ch <- allReduceChecked(ctx, c, 1<<16+3, call) }()
		}
		for range w {
			require.NoError(t, <-ch)
		}
	}
	_, why := comms[1].Algo(KindAllReduce, 4<<16)
	require.False(t, strings.Contains(why, "algo_tune"), why)
}

// TestAlgoTuneConfig: algo_tune comes from the option, GOCCL_ALGO_TUNE and the config
// file alike, and a value other than model or online fails Init with the valid ones.
func TestAlgoTuneConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := LoadConfig(env(map[string]string{"GOCCL_ALGO_TUNE": "online"}))
	require.NoError(t, err)
	require.Equal(t, AlgoTuneOnline, c.AlgoTune)
	require.Contains(t, c.String(), "algo_tune=online")

	dir := t.TempDir()
	path := dir + "/goccl.yaml"
	require.NoError(t, os.WriteFile(path, []byte("algo_tune: model\n"), 0o644))
	c, err = LoadConfig(env(map[string]string{"GOCCL_CONFIG": path}))
	require.NoError(t, err)
	require.Equal(t, AlgoTuneModel, c.AlgoTune)
	require.Equal(t, AlgoTuneOnline, c.Apply(WithAlgoTune(AlgoTuneOnline)).AlgoTune)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = InitLocal(ctx, 2, WithAlgoTune("fast"))
	require.ErrorContains(t, err, `algo_tune "fast" (valid: model, online)`)
}

// TestAlgoCandsStaged: staged is a candidate where the group has a staging area and
// the model prices it near; a staged range the config sets binds (outside it, staged
// is left out), as does shm.staged_min off; the built-in range does not.
func TestAlgoCandsStaged(t *testing.T) {
	names := func(c *Comm, pick algos.Algorithm, bytes int) []string {
		var out []string
		for _, a := range c.algoCands(pick, bytes) {
			out = append(out, a.Name())
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		stageable  bool
		min, max   int
		set        bool
		wantStaged bool
	}{
		{"built-in range above the size", true, 16 << 20, math.MaxInt, false, true},
		{"no staging area", false, 16 << 20, math.MaxInt, false, false},
		{"staged_min off", true, -1, math.MaxInt, true, false},
		{"config range above the size", true, 16 << 20, math.MaxInt, true, false},
		{"config range below the size", true, 4 << 10, 512 << 10, true, false},
		{"config range around the size", true, 512 << 10, 4 << 20, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Comm{size: 3, stageable: tc.stageable, stagedMin: tc.min, stagedMax: tc.max, stagedSet: tc.set}
			c.algoTune.band = algoBand
			ring := withShmModel(t, c)
			got := names(c, ring, 1<<20)
			require.Equal(t, "ring", got[0], "the pick comes first")
			require.Equal(t, tc.wantStaged, slices.Contains(got, staged.Name), "%v", got)
		})
	}

	// A staged pick is tried beside the fastest of the others even where the model
	// prices that one beyond the band: at 3 ranks the model puts staged well ahead of
	// every other from 1 MiB, and the order has turned from host to host.
	c := &Comm{size: 3, stageable: true, stagedMin: 512 << 10, stagedMax: math.MaxInt}
	c.algoTune.band = algoBand
	withShmModel(t, c)
	for _, bytes := range []int{1 << 20, 8<<20 + 12} {
		tStaged, err := algos.ShmModel.Predict(staged.Name, KindAllReduce, bytes, 3)
		require.NoError(t, err)
		best, bestT := "", time.Duration(math.MaxInt64)
		for _, name := range []string{"ring", "naive", "rd"} {
			tn, err := algos.ShmModel.Predict(name, KindAllReduce, bytes, 3)
			require.NoError(t, err)
			if tn < bestT {
				best, bestT = name, tn
			}
		}
		require.Greater(t, float64(bestT), algoBand*float64(tStaged), "%d B: the case this covers", bytes)
		got := names(c, stagedAlgo, bytes)
		require.Equal(t, []string{staged.Name, best}, got, "%d B", bytes)
	}
}

// TestAlgoTuneRandom runs seeded random sequences of AllReduces with algo_tune online
// and a short schedule (every size above the exchange's tuned, candidates once each,
// an agreement after every second call of a class): sizes that repeat their classes,
// every dtype and op, in place or not, blocking or several in flight together, and spec
// changes between auto and a fixed algorithm (which leaves the tuner's counts alone on
// every rank), over inmem, shm and tcp at 2-4 ranks. Every result is checked against
// algostest's serial reference, and at the end every rank must hold the same counts
// and choices. GOCCL_RANDOM_SEEDS and GOCCL_RANDOM_SEED work as for TestRandomCalls.
func TestAlgoTuneRandom(t *testing.T) {
	n := 6
	if testing.Short() {
		n = 2
	}
	for _, seed := range seeds.List(t, n, 7) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x7e11e))
			w := 2 + rng.IntN(3)
			transports := []string{"inmem", "shm", "tcp"}
			if raceEnabled {
				transports = []string{"inmem", "tcp"} // see race_on_test.go
			}
			tr := pick(rng, transports...)
			t.Logf("seed %d: %d ranks over %s", seed, w, tr)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			comms, err := InitLocal(ctx, w, WithTransport(tr), WithAlgoTune(AlgoTuneOnline), WithTimeout(time.Minute))
			require.NoError(t, err)
			defer func() {
				for _, c := range comms {
					c.Close()
				}
			}()
			shortTune(comms)
			mesh, err := algostest.NewMesh(ctx, w)
			require.NoError(t, err)
			defer mesh.Close()
			counts := []int{300, 301, 4999, 70001, 1<<18 + 1}
			newCase := func() algostest.Case {
				c := algostest.Case{Kind: KindAllReduce, DType: pick(rng, randomDTypes...), Op: pick(rng, randomOps...),
					Count: pick(rng, counts...), InPlace: rng.IntN(2) == 0, Seed: rng.Uint64()}
				c.Count = max(1, c.Count*4/c.DType.Size()) // the same bytes, and so classes, whatever the dtype
				return c
			}
			calls := 50
			if raceEnabled {
				calls = 20
			}
			for i := 0; i < calls; {
				switch r := rng.IntN(10); {
				case r == 0:
					spec := pick(rng, "auto", "auto", "ring", "naive")
					for _, c := range comms {
						require.NoError(t, c.SetAlgo(spec))
					}
				case r < 4:
					batch := make([]algostest.Case, 2+rng.IntN(3))
					for j := range batch {
						batch[j] = newCase()
					}
					require.NoError(t, algostest.CheckBatch(ctx, mesh, batch, commIssue(comms, true), nil), "calls %d-%d", i, i+len(batch)-1)
					i += len(batch)
				default:
					require.NoError(t, algostest.CheckBatch(ctx, mesh, []algostest.Case{newCase()}, commIssue(comms, rng.IntN(4) == 0), nil), "call %d", i)
					i++
				}
			}
			agreed := 0
			for k := range comms[0].algoTune.class {
				want := &comms[0].algoTune.class[k]
				if want.calls > 0 && len(want.cands) > 1 && want.calls >= uint64(len(want.cands)) {
					agreed++
				}
				for _, c := range comms[1:] {
					got := &c.algoTune.class[k]
					require.Equal(t, want.calls, got.calls, "rank %d class %d", c.rank, k)
					require.Equal(t, want.choice, got.choice, "rank %d class %d", c.rank, k)
				}
			}
			t.Logf("%d classes reached an agreement (tuning %t)", agreed, comms[0].algoTune.on)
		})
	}
}
