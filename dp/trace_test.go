package dp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/dp"
)

// With GOCCL_TRACE (WithTrace) the timeline shows one span per DDP bucket and per ZeRO
// shard collective, next to the communicator's own spans.
func TestBucketSpansOnTimeline(t *testing.T) {
	for _, stage := range []int{0, 2, 3} {
		dir := t.TempDir()
		ctx := context.Background()
		comms, err := goccl.InitLocal(ctx, 2, goccl.WithName("dp-trace"), goccl.WithTrace(dir))
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for r, c := range comms {
			wg.Go(func() {
				defer c.Close()
				specs := []dp.Spec{{Name: "a", Len: 5}, {Name: "b", Len: 7}}
				hp := dp.AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
				eng, err := dp.New(ctx, c, specs, dp.Options{Stage: stage, AdamW: &hp})
				for _, f := range []func(context.Context, int) error{eng.BeginForward, eng.EndForward, eng.BeginBackward} {
					if err == nil {
						err = f(ctx, 0)
					}
				}
				for i := 1; i >= 0 && err == nil; i-- {
					err = eng.MarkReady(ctx, i)
				}
				if err == nil {
					err = eng.Wait(ctx)
				}
				if err == nil {
					err = eng.Step(ctx)
				}
				errs[r] = err
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "goccl-trace.*.json"))
		require.Len(t, files, 2)
		b, err := os.ReadFile(files[0])
		require.NoError(t, err)
		want := map[int]string{0: `"ddp bucket 0 allreduce"`, 2: `"zero2 bucket 0 reducescatter"`, 3: `"zero3 layer 0 allgather"`}[stage]
		require.True(t, strings.Contains(string(b), want), "stage %d: %s missing from the trace", stage, want)
	}
}
