package tune_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/goccl/goccl/internal/tune"
	"github.com/goccl/goccl/transport"
)

// FuzzLoad feeds arbitrary bytes to Load as a tune file (GOCCL_TUNE_FILE): either an
// error wrapping ErrInvalid, or models whose every prediction, for every algorithm,
// collective, size and world size, is a time of at least zero; never a panic, and
// never a model whose overflowing terms make a call look free or negative to auto.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"version": 2, "created": "2026-12-03T17:52:19Z", "world": 2, "models": {"shm": {"alpha_ns": 0,
		"overhead_ns": 371, "beta_bytes_per_s": 8022980591.3, "gamma_bytes_per_s": 11768833465.7, "cores": 2,
		"eager_bytes": 1048576}}, "staged": [{"world": 2, "min_bytes": 131072, "max_bytes": 1048576}]}`))
	f.Add([]byte(`{"version": 2, "models": {"tcp": {"alpha_ns": 1e12, "beta_bytes_per_s": 1e-300, "call_ns": 1e12}}}`))
	f.Add([]byte(`{"version": 1, "models": {}}`))
	f.Add([]byte(`{"version": 2, "models": {"shm": {"beta_bytes_per_s": 1, "crowded": {"beta_bytes_per_s": 0}}}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "tune.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := tune.Load(path)
		if err != nil {
			if !errors.Is(err, transport.ErrInvalid) {
				t.Fatalf("Load(%q): %v does not wrap ErrInvalid", data, err)
			}
			return
		}
		for name, m := range file.CostModels() {
			for _, alg := range []string{"ring", "tree", "naive", "rd", "hier", "staged", "direct"} {
				for _, k := range []transport.Kind{transport.KindAllReduce, transport.KindAllGather, transport.KindBroadcast,
					transport.KindAllToAll, transport.KindBarrier} {
					for _, w := range []int{2, 3, 1024} {
						for _, n := range []int{0, 8, 1 << 20, 1 << 40} {
							d, err := m.Predict(alg, k, n, w)
							if err == nil && d < 0 {
								t.Fatalf("Load(%q): model %s predicts %v for %s %v of %d bytes at %d ranks", data, name, d, alg, k, n, w)
							}
						}
					}
				}
			}
		}
	})
}
