package perf

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/goccl/goccl/nccl/kernels/kerneltest"
	"github.com/stretchr/testify/require"
)

// TestEndToEndCUDAFakes runs `goccl perf --device cuda` as a user would on a GPU
// machine, with the fake libcudart and libnccl from nccl/testdata standing in for the
// real ones (a contract test of perf's CUDA path, not evidence that CUDA works:
// scripts/gpu-check.sh is that). It checks the "Using devices" line against
// nccl-tests' format ("device  0 [0000:18:00] NAME", one pair of brackets), and that
// NCCL's own AllReduce at one rank and our ring over shm with staged device buffers at
// two ranks report no wrong element at sizes of one element, odd, and past two of the
// stager's 4 MiB chunks.
func TestEndToEndCUDAFakes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	env := kerneltest.ForProcesses(t)
	devLine := regexp.MustCompile(`(?m)^#  Rank  ([01]) Group  0 Pid +\d+ on +\S+ device  ([01]) \[[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\] \S.*$`)
	for _, tc := range []struct {
		name string
		np   int
		args []string
	}{
		{"nccl 1 rank", 1, []string{"--transport", "nccl", "--algo", "nccl", "-b", "5", "-e", "16M", "-f", "1700"}},
		{"shm staged 2 ranks", 2, []string{"--transport", "shm", "--algo", "ring", "-b", "5", "-e", "16M", "-f", "1700"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"all_reduce", "--np", strconv.Itoa(tc.np), "--device", "cuda",
				"-n", "2", "-w", "1", "-c", "1"}, tc.args...)
			out, errOut, code := runPerf(t, env, args...)
			require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			lines := devLine.FindAllString(out, -1)
			require.Len(t, lines, tc.np, "one nccl-tests device line per rank:\n%s", out)
			require.NotContains(t, out, "[[", "the PCI address is bracketed once")
			rows := parseRows(t, out)
			require.Len(t, rows, 3)
			for _, r := range rows {
				require.Equal(t, "0", r.wrongOOP, "size %d", r.size)
				require.Equal(t, "0", r.wrIP, "size %d", r.size)
			}
			require.Contains(t, out, "# Out of bounds values : 0 OK\n")
			require.Contains(t, out, "# Collective test concluded: all_reduce_perf\n")
		})
	}
}
