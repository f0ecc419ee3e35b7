package dp_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/dp/mlp"
)

// TestSharedMemoryEquivalent: with Options.SharedMemory over shm, DDP's and ZeRO's
// collectives on the shared gradient and parameter buffers read each other's memory in
// place (the direct algorithm, forced to every size here), and training still matches
// one process with the whole batch, every rank alike; the memory report is unchanged.
func TestSharedMemoryEquivalent(t *testing.T) {
	const tol = 2e-6
	dims := []int{13, 17, 9, 5}
	for _, stage := range []int{0, 1, 2, 3} {
		for _, w := range []int{2, 3} {
			t.Run(fmt.Sprintf("stage%d/W%d", stage, w), func(t *testing.T) {
				var comms []*goccl.Comm
				c := run{world: w, batch: 2, accum: 1, steps: 3, stage: stage, dims: dims, bucket: 256, shared: true, comms: &comms}
				ref := run{world: 1, batch: w * 2, accum: 1, steps: 3, stage: 0, dims: dims}
				want, _, _ := train(t, ref)
				got, _, mems := train(t, c)
				for s := range c.steps {
					for r := range w {
						require.Equal(t, got[s][0], got[s][r], "step %d: rank %d differs from rank 0", s, r)
					}
					require.LessOrEqual(t, maxDiff(got[s][0], want[s][0]), tol, "step %d", s)
				}
				plain := c
				plain.shared, plain.comms = false, nil
				_, _, plainMems := train(t, plain)
				for r := range mems {
					// WorkingPeak depends on timing (ZeRO-3's prefetch); the persistent
					// buffers must not depend on where they live.
					mems[r].WorkingPeak, plainMems[r].WorkingPeak = 0, 0
				}
				require.Equal(t, plainMems, mems, "the memory report does not depend on where the buffers live")
				for r, cm := range comms {
					direct := cm.Stats().ByAlgo["direct"].Calls
					if stage < 3 {
						require.Positive(t, direct, "rank %d: no collective read the shared buffers in place", r)
					} else {
						require.Zero(t, direct, "rank %d: ZeRO-3 keeps no full buffer to share", r)
					}
				}
			})
		}
	}
}

// TestSharedMemoryNeedsHost: SharedMemory refuses a communicator that cannot allocate
// shared memory, saying what it needs.
func TestSharedMemoryNeedsHost(t *testing.T) {
	comms := ranks(t, 1)
	model, err := mlp.New([]int{3, 2})
	require.NoError(t, err)
	_, err = dp.NewOn(testCtx(t), noShared{comms[0]}, model.Specs(1), dp.Options{SharedMemory: true})
	require.ErrorContains(t, err, "SharedMemory needs the host device")
}

// noShared hides the adapter's AllocShared.
type noShared struct{ dp.Collectives }
