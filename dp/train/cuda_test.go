package train

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/nccl/kernels/kerneltest"
)

// TestMultiProcessCUDAFakes: `goccl train --np 2 --device cuda` as two processes whose
// collectives go over shm with device buffers staged through pinned memory (what issue
// 8 names for several ranks on one GPU), at ZeRO 0 and 3, against the same two processes
// on the CPU. The fake CUDA libraries from nccl/testdata stand in for a GPU (host
// memory, the generated kernels compiled for the CPU, cuBLAS summing in order), so this
// is the path's contract, not GPU behaviour: scripts/gpu-check.sh is that. Only the
// summation order of the matrix products differs from gonum's, so the losses agree to
// 1e-3 over these 6 steps.
func TestMultiProcessCUDAFakes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, kv := range kerneltest.ForProcesses(t) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	if raceEnabled {
		t.Setenv("GOCCL_TRANSPORT", "tcp")
	}
	common := []string{"--np", "2", "--steps", "6", "--log-every", "1", "--warmup", "1", "--dims", "16,24,5", "--lr", "0.01", "--batch", "4"}
	for _, stage := range []string{"0", "3"} {
		cpu, errCPU, code := runMain(t, append([]string{"--zero", stage, "--device", "cpu"}, common...)...)
		require.Zero(t, code, "stage %s cpu: %s", stage, errCPU)
		gpu, errGPU, code := runMain(t, append([]string{"--zero", stage, "--device", "cuda"}, common...)...)
		require.Zero(t, code, "stage %s cuda: %s", stage, errGPU)
		require.Contains(t, gpu, "# device: cuda:0")
		if !raceEnabled {
			require.Contains(t, gpu, "# transport to rank 1: shm")
		}
		want, got := losses(t, cpu), losses(t, gpu)
		require.Len(t, got, len(want))
		for step, w := range want {
			a, err1 := strconv.ParseFloat(w, 64)
			b, err2 := strconv.ParseFloat(got[step], 64)
			require.NoError(t, errors.Join(err1, err2))
			require.LessOrEqual(t, math.Abs(a-b), 1e-3, "stage %s step %s: cpu %s cuda %s", stage, step, w, got[step])
		}
		require.Regexp(t, `(?m)^1\s+\d`, gpu, "memory row of rank 1")
	}
}
