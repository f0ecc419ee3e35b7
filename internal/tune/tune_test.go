package tune_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/internal/tune"
	"github.com/goccl/goccl/transport"
)

// ringTime and naiveTime are the textbook AllReduce costs, written out here
// independently of package algos: the ring moves 2(W-1)/W of the buffer in 2(W-1)
// steps and reduces (W-1)/W of it; the root of the naive algorithm receives and
// reduces W-1 whole buffers and sends W-1 back, in 2(W-1) steps.
func ringTime(alpha, beta, gamma float64, n, w int) float64 {
	wf := float64(w)
	return 2*(wf-1)*alpha + 2*(wf-1)/wf*float64(n)/beta + (wf-1)/wf*float64(n)/gamma
}

func naiveTime(alpha, beta, gamma float64, n, w int) float64 {
	wf := float64(w)
	return 2*(wf-1)*alpha + (wf-1)*float64(n)/beta + (wf-1)*float64(n)/gamma
}

var sizes = []int{8, 100, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20}

func TestFitRecoversModel(t *testing.T) {
	for _, tc := range []struct {
		name               string
		alpha, beta, gamma float64
		world              int
	}{
		{"shm-like w2", 2e-6, 6e9, 8e9, 2},
		{"tcp-like w4", 30e-6, 1.2e9, 6e9, 4},
		{"slow w3", 1e-3, 1e8, 1e9, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pts []tune.Point
			for _, n := range sizes {
				pts = append(pts,
					tune.Point{Algo: "ring", Bytes: n, Seconds: ringTime(tc.alpha, tc.beta, tc.gamma, n, tc.world)},
					tune.Point{Algo: "naive", Bytes: n, Seconds: naiveTime(tc.alpha, tc.beta, tc.gamma, n, tc.world)})
			}
			m, worst, err := tune.Fit(pts, tc.world, 0)
			require.NoError(t, err)
			require.Less(t, worst, 0.01, "the samples follow the model exactly")
			require.InEpsilon(t, tc.alpha, m.Alpha.Seconds(), 0.01)
			require.InEpsilon(t, tc.beta, m.Beta, 0.01)
			require.InEpsilon(t, tc.gamma, m.Gamma, 0.01)
			// The fitted model predicts every sample, as the selector would use it.
			for _, p := range pts {
				d, err := m.Predict(p.Algo, transport.KindAllReduce, p.Bytes, tc.world)
				require.NoError(t, err)
				require.InEpsilon(t, p.Seconds, d.Seconds(), 0.02, "%s at %d bytes", p.Algo, p.Bytes)
			}
		})
	}
}

// TestFitNoisy: +-5% noise on every sample still gives the parameters within 20%.
func TestFitNoisy(t *testing.T) {
	const alpha, beta, gamma, w = 10e-6, 2e9, 5e9, 2
	var pts []tune.Point
	for i, n := range sizes {
		noise := 1 + 0.05*math.Sin(float64(i*7+1)) // deterministic, both signs
		pts = append(pts,
			tune.Point{Algo: "ring", Bytes: n, Seconds: ringTime(alpha, beta, gamma, n, w) * noise},
			tune.Point{Algo: "naive", Bytes: n, Seconds: naiveTime(alpha, beta, gamma, n, w) / noise})
	}
	m, worst, err := tune.Fit(pts, w, 0)
	require.NoError(t, err)
	require.Less(t, worst, 0.15)
	require.InEpsilon(t, alpha, m.Alpha.Seconds(), 0.2)
	require.InEpsilon(t, beta, m.Beta, 0.2)
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
			_, _, err := tune.Fit(tc.pts, tc.world, 0)
			require.ErrorIs(t, err, transport.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "models.json")
	f := tune.NewFile(tune.Models{"shm": {Alpha: 1500 * time.Nanosecond, Beta: 6e9, Gamma: 9e9}, "tcp": {Alpha: 20 * time.Microsecond, Beta: 1e9}}, 4)
	require.NoError(t, tune.Save(path, f))
	got, err := tune.Load(path)
	require.NoError(t, err)
	require.Equal(t, 4, got.World)
	ms := got.CostModels()
	require.Equal(t, 1500*time.Nanosecond, ms["shm"].Alpha)
	require.Equal(t, 6e9, ms["shm"].Beta)
	require.Equal(t, 9e9, ms["shm"].Gamma)
	require.Equal(t, 1e9, ms["tcp"].Beta)

	bad := map[string]string{
		"version":   `{"version": 7, "world": 2, "models": {"shm": {"alpha_ns": 1, "beta_bytes_per_s": 1e9, "gamma_bytes_per_s": 0}}}`,
		"beta":      `{"version": 1, "world": 2, "models": {"shm": {"alpha_ns": 1, "beta_bytes_per_s": 0, "gamma_bytes_per_s": 0}}}`,
		"alpha_ns":  `{"version": 1, "world": 2, "models": {"tcp": {"alpha_ns": -5, "beta_bytes_per_s": 1e9, "gamma_bytes_per_s": 0}}}`,
		"unknown":   `{"version": 1, "world": 2, "modles": {}}`,
		"no models": `{"version": 1, "world": 2, "models": {}}`,
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
		require.Len(t, res[0].Samples, 3*2)
		m := res[0].Models["inmem"]
		require.Greater(t, m.Beta, 0.0)
		require.GreaterOrEqual(t, m.Alpha, time.Duration(0))
		f := res[0].File()
		require.Equal(t, world, f.World)
		require.Len(t, f.Samples["inmem"], 6)
		name, why := comms[0].Algo(goccl.KindAllReduce, 1<<20)
		require.NotEmpty(t, name)
		require.Contains(t, why, "auto")
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
