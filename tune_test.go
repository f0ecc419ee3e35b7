package goccl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/internal/tune"
)

// A cost-model file from `goccl tune` replaces the built-in model the auto selector uses.
func TestTuneFileDrivesAuto(t *testing.T) {
	path := filepath.Join(t.TempDir(), "models.json")
	// A transport with a 2 ms step and almost free bandwidth: fewest steps must win.
	slow := algos.CostModel{Alpha: 2 * time.Millisecond, Beta: 1e15, Gamma: 1e15}
	require.NoError(t, tune.Save(path, tune.NewFile(tune.Models{"shm": slow}, 4)))

	def := local(t, 4)
	tuned := local(t, 4, goccl.WithTuneFile(path))
	_, whyDef := def[0].Algo(goccl.KindAllReduce, 1<<20)
	_, whyTuned := tuned[0].Algo(goccl.KindAllReduce, 1<<20)
	require.Contains(t, whyTuned, "ms", "the tuned 2 ms step must show in the model's times: %s", whyTuned)
	require.NotEqual(t, whyDef, whyTuned)
	want, err := slow.Predict("ring", goccl.KindAllReduce, 1<<20, 4)
	require.NoError(t, err)
	require.True(t, strings.Contains(whyTuned, algos.FormatDuration(want)) || !strings.HasPrefix(whyTuned, "ring"),
		"reason %q should quote the tuned prediction %s", whyTuned, algos.FormatDuration(want))
}

func TestTuneFileBad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "models.json")
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o644))
	_, err := goccl.InitLocal(t.Context(), 2, goccl.WithTuneFile(path))
	require.Error(t, err)
	require.Contains(t, err.Error(), "tune_file")
}
