package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
	"github.com/stretchr/testify/require"
)

var (
	buildOnce sync.Once
	goBinary  string
	buildErr  error
)

// gocclBinary builds ./cmd/goccl once for all end-to-end tests.
func gocclBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "goccl-perf-e2e")
		if err != nil {
			buildErr = err
			return
		}
		goBinary = filepath.Join(dir, "goccl")
		out, err := exec.Command("go", "build", "-o", goBinary, "github.com/goccl/goccl/cmd/goccl").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return goBinary
}

// runPerf runs `goccl perf args...` with a clean launcher environment.
func runPerf(t *testing.T, extraEnv []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gocclBinary(t), append([]string{"perf"}, args...)...)
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		if strings.HasPrefix(k, "GOCCL_") || k == "RANK" || k == "WORLD_SIZE" || k == "MASTER_ADDR" || k == "MASTER_PORT" ||
			strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "PMI_") || k == "NCCL_TESTS_MIN_BW" {
			continue
		}
		cmd.Env = append(cmd.Env, e)
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "goccl perf %v did not finish in time\nstdout:\n%s\nstderr:\n%s", args, o.String(), e.String())
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return o.String(), e.String(), code
}

// row is one parsed data row of the table.
type row struct {
	size, count    int64
	typ, op        string
	root           int
	wrongOOP, wrIP string
}

func parseRows(t *testing.T, out string) []row {
	var rows []row
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if (len(f) != 13 && len(f) != 16) || strings.HasPrefix(line, "#") { // 16: with --predict
			continue
		}
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		count, err2 := strconv.ParseInt(f[1], 10, 64)
		root, err3 := strconv.Atoi(f[4])
		require.NoError(t, errors.Join(err1, err2, err3), line)
		rows = append(rows, row{size, count, f[2], f[3], root, f[8], f[12]})
	}
	return rows
}

func TestEndToEndEveryCollective(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const np = 3
	sizes := []int64{0, 1033, 2066, 3099} // 0, odd, not divisible by 3 for any element size
	for _, c := range Collectives {
		t.Run(c.Name, func(t *testing.T) {
			args := []string{c.Name, "--np", strconv.Itoa(np), "--transport", "tcp", "-c", "1",
				"-b", "0", "-e", "4099", "-i", "1033", "-n", "2", "-w", "1", "-d", "all"}
			ops := []string{"none"}
			if c.Reduces {
				args = append(args, "-o", "all")
				ops = nil
				for _, o := range transport.Ops {
					ops = append(ops, o.String())
				}
			}
			roots := []int{-1}
			if c.Rooted {
				args = append(args, "-r", "-1")
				roots = []int{0, 1, 2}
			}
			out, errOut, code := runPerf(t, nil, args...)
			require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			require.Contains(t, out, "# Collective test starting: "+c.Program()+"\n")
			require.Contains(t, out, "# Out of bounds values : 0 OK\n")
			require.Contains(t, out, "# Collective test concluded: "+c.Program()+"\n")
			require.Equal(t, np, strings.Count(out, "#  Rank "), "one device line per rank")
			rows := parseRows(t, out)
			require.Len(t, rows, len(transport.DTypes)*len(ops)*len(roots)*len(sizes))
			i := 0
			for _, d := range transport.DTypes {
				for _, op := range ops {
					for _, root := range roots {
						for _, size := range sizes {
							r := rows[i]
							i++
							k := c.CountsFor(size, d.Size(), np)
							want := row{k.Bytes(d.Size()), k.Param, TypeName(d), op, root, "0", "0"}
							require.Equal(t, want, r)
						}
					}
				}
			}
		})
	}
}

func TestEndToEndLargeAndShm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	js := filepath.Join(dir, "r.json")
	png := filepath.Join(dir, "bw.png")
	out, errOut, code := runPerf(t, nil, "all_reduce_perf", "--np", "3", "--transport", "shm,tcp", "--algo", "ring,auto",
		"-b", "1M", "-e", "4M", "-f", "4", "-n", "3", "-w", "1", "-c", "1", "-J", js, "--plot", png)
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, 4, strings.Count(out, "# Out of bounds values : 0 OK\n"), "one report per transport/algorithm")
	rows := parseRows(t, out)
	require.Len(t, rows, 4*2)
	for _, r := range rows {
		require.Equal(t, "0", r.wrongOOP)
	}
	matches, err := filepath.Glob(filepath.Join(dir, "r-*.json"))
	require.NoError(t, err)
	require.Len(t, matches, 4)
	b, err := os.ReadFile(matches[0])
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc), "%s", b)
	require.Len(t, doc["results"], 2)
	_, err = os.Stat(png)
	require.NoError(t, err)
}

// TestEndToEndTwoRankFused: two processes over shm, one P each as the launcher gives
// them on a 2-core host, run the two-rank ring's fused steps (algos/ring/fused.go) for
// sums and averages of float32, float64, bfloat16 and float16 that interleave: every
// dtype's data checked at 2 and 8 MiB, odd float and bfloat16 counts, an odd double
// count with every op, and odd 16-bit averages; each rank's trace at the odd counts
// holds the in-place sends that only that path makes.
func TestEndToEndTwoRankFused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	// Without AVX2 the fused steps do not run here, and only the values are checked.
	streams := reduce.DualStreams(transport.Float32, transport.Sum, 2) && reduce.DualStreams(transport.Float64, transport.Sum, 2) &&
		reduce.DualStreams(transport.BFloat16, transport.Sum, 2) && reduce.DualStreams(transport.Float16, transport.Avg, 2)
	for _, l := range []struct {
		fused string // the dtype whose trace must show the fused steps, or "" for a check of values only
		args  []string
	}{
		{"", []string{"-b", "2M", "-e", "8M", "-f", "4", "-d", "all"}},
		{"float32", []string{"-b", "4000004", "-e", "4000004"}},
		{"float64", []string{"-b", "4000008", "-e", "4000008", "-d", "double", "-o", "all"}},
		{"bfloat16", []string{"-b", "4000002", "-e", "4000002", "-d", "bfloat16"}},
		{"bfloat16 avg", []string{"-b", "4000002", "-e", "4000002", "-d", "bfloat16", "-o", "avg"}},
		{"float16 avg", []string{"-b", "4000002", "-e", "4000002", "-d", "half", "-o", "avg"}},
	} {
		dir := t.TempDir()
		out, errOut, code := runPerf(t, []string{"GOMAXPROCS=1", "GOCCL_TRACE=" + dir}, append([]string{"all_reduce", "--np", "2",
			"--transport", "shm", "--algo", "ring", "-n", "2", "-w", "1", "-c", "1"}, l.args...)...)
		require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		for _, r := range parseRows(t, out) {
			require.Equal(t, "0", r.wrongOOP, "%+v", r)
			require.Equal(t, "0", r.wrIP, "%+v", r)
		}
		if l.fused == "" || !streams {
			continue
		}
		traces, err := filepath.Glob(filepath.Join(dir, "goccl-trace.*.json"))
		require.NoError(t, err)
		require.Len(t, traces, 2, "%s: one launch of two ranks", l.fused)
		for _, tr := range traces {
			b, err := os.ReadFile(tr)
			require.NoError(t, err)
			require.True(t, strings.Contains(string(b), "send (in place)"), "%s, %s: no all-gather chunk written in place", l.fused, tr)
		}
	}
}

func TestEndToEndCorruptedRunFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, coll := range []string{"all_reduce", "reduce", "all_gather"} {
		out, errOut, code := runPerf(t, []string{FaultEnv + "=corrupt"}, coll, "--np", "3", "--transport", "tcp",
			"-b", "64", "-e", "256", "-f", "2", "-n", "1", "-w", "0", "-c", "1")
		require.Equal(t, ExitWrongData, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		require.Contains(t, out, "# Out of bounds values : 6 FAILED\n", "3 sizes x 2 halves, each caught once")
		for _, r := range parseRows(t, out) {
			require.Equal(t, "1", r.wrongOOP, "one flipped element per check")
			require.Equal(t, "1", r.wrIP)
		}
	}
}

func TestEndToEndUsageErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	_, errOut, code := runPerf(t, nil, "all_reduce", "-n", "many")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, `flag -n (--iters): "many" is not an integer`)

	_, errOut, code = runPerf(t, nil, "broadcast", "--np", "2", "--transport", "tcp", "-r", "5", "-b", "8", "-e", "8")
	require.Equal(t, ExitUsage, code, errOut)
	require.Contains(t, errOut, "-r 5 is not a rank of this 2-rank run (valid: 0..1, or -1 for every root)")

	out, _, code := runPerf(t, nil, "-h")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "--minbytes")
}

// TestEndToEndShared: -R 2 puts the buffers in AllocShared memory between real
// processes over shm; the four collectives that read it in place are checked at sizes
// below and above shm.direct_min (8 KiB here), odd ones included, every op, and the
// predict column names direct where it ran. Over tcp the memory is not shared and the
// header says so.
func TestEndToEndShared(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, coll := range []string{"all_reduce", "reduce_scatter", "all_gather", "broadcast"} {
		t.Run(coll, func(t *testing.T) {
			out, errOut, code := runPerf(t, []string{"GOCCL_SHM_DIRECT_MIN=8K"}, coll, "--np", "3", "--transport", "shm",
				"-b", "3", "-e", "1M", "-f", "7", "-n", "2", "-w", "1", "-c", "1", "-o", "all", "-R", "2", "--predict")
			require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			require.Contains(t, out, "read them in place (algorithm direct)")
			rows := parseRows(t, out)
			require.NotEmpty(t, rows)
			for _, r := range rows {
				require.Equal(t, "0", r.wrongOOP, "%+v", r)
				require.Equal(t, "0", r.wrIP, "%+v", r)
			}
			direct := pricedRows(t, out, "direct")
			require.Positive(t, direct, "no row ran direct:\n%s", out)
		})
	}
	// Without -R 2, 3 ranks pass AllGathers from 4 MiB through the staging area
	// (shm.StagedGatherFor): the 6 and 12 MiB rows, not the 3 MiB one.
	out, errOut, code := runPerf(t, nil, "all_gather", "--np", "3", "--transport", "shm",
		"-b", "3M", "-e", "12M", "-f", "2", "-n", "2", "-w", "1", "-c", "1", "--predict")
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, 2, pricedRows(t, out, "staged"), out)
	out, errOut, code = runPerf(t, nil, "all_reduce", "--np", "2", "--transport", "tcp", "-b", "1M", "-e", "1M", "-n", "2", "-c", "1", "-R", "2")
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "not shared (not every link is shm")
}

// pricedRows counts the rows of a --predict table that ran alg, and checks that the
// model priced each of them: a positive time and a finite error in its columns.
func pricedRows(t *testing.T, out, alg string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 16 || strings.HasPrefix(line, "#") || f[15] != alg {
			continue
		}
		n++
		var us, errPct float64
		_, err := fmt.Sscan(f[13], &us)
		require.NoError(t, err, "model time of %q", line)
		require.Positive(t, us, line)
		_, err = fmt.Sscan(f[14], &errPct)
		require.NoError(t, err, "model error of %q", line)
		require.False(t, math.IsNaN(errPct) || math.IsInf(errPct, 0), line)
	}
	return n
}
