package train

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain lets --np re-execute this test binary as the ranks: launch starts
// os.Executable() with "train" and the flags, and marks the children with childEnv.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" && len(os.Args) > 1 && os.Args[1] == "train" {
		os.Exit(Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func runMain(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errb lockedBuffer
	code := Main(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

// lockedBuffer is written by the ranks' output copiers concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var lossLine = regexp.MustCompile(`(?m)^\s+(\d+)\s+([0-9.]+)\s`)

func losses(t *testing.T, out string) map[string]string {
	m := map[string]string{}
	for _, g := range lossLine.FindAllStringSubmatch(out, -1) {
		m[g[1]] = g[2]
	}
	require.NotEmpty(t, m, "no loss lines in:\n%q", out)
	return m
}

// Real processes: `goccl train --np 2` re-executes the binary as two ranks that
// rendezvous through the launcher's store; with batch 4 each they must print the
// same losses as one process with batch 8 (the seeds' equivalence, end to end), and
// a memory table with a row per rank.
func TestMultiProcessTrainMatchesOneProcess(t *testing.T) {
	if raceEnabled {
		t.Setenv("GOCCL_TRANSPORT", "tcp")
	}
	common := []string{"--steps", "6", "--log-every", "2", "--warmup", "1", "--dims", "16,24,5", "--lr", "0.01"}
	one, errOne, code := runMain(t, append([]string{"--batch", "8"}, common...)...)
	require.Zero(t, code, errOne)
	for _, stage := range []string{"0", "1", "3"} {
		two, errTwo, code := runMain(t, append([]string{"--np", "2", "--zero", stage, "--batch", "4"}, common...)...)
		require.Zero(t, code, "stage %s: %s", stage, errTwo)
		require.Equal(t, losses(t, one), losses(t, two), "stage %s: --np 2 --batch 4 against one process --batch 8\n%s\n%s", stage, one, two)
		require.Contains(t, two, "2 ranks")
		require.Regexp(t, `(?m)^1\s+\d`, two, "memory row of rank 1")
	}
}

func TestLocalRanksReport(t *testing.T) {
	out, errs, code := runMain(t, "--local", "3", "--zero", "2", "--precision", "bf16", "--steps", "4", "--warmup", "1",
		"--dims", "8,16,3", "--batch", "5", "--accum", "2")
	require.Zero(t, code, errs)
	for _, want := range []string{"3 ranks, ZeRO-2, bfloat16, batch 5 x 3 ranks x 2 accum = 30", "# memory per rank (ZeRO-2; formula: 2N + (2+12)N/W",
		"hidden", "exposed"} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 3, strings.Count(out, " MiB\n"), "one memory row per rank:\n%s", out)
	out, errs, code = runMain(t, "--local", "2", "--bench", "--steps", "3", "--warmup", "1", "--dims", "8,16,3", "--tsv")
	require.Zero(t, code, errs)
	require.Regexp(t, `goccl_train\tnp=2\tzero=0\tprecision=float32\tparams=\d+\tbatch=32\tstep_ms=[0-9.]+\tnosync_ms=[0-9.]+`, out)
}

func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--zero", "4"}, "--zero 4 (valid: 0 = DDP, 1, 2, 3)"},
		{[]string{"--dims", "8,x,3"}, `"x" is not a positive layer size`},
		{[]string{"--np", "2", "--local", "2"}, "not both"},
		{[]string{"--steps", "0"}, "each must be >= 1"},
		{[]string{"--warmup", "5", "--steps", "5"}, "leaves no measured step"},
		{[]string{"--precision", "fp8", "--steps", "2", "--warmup", "0"}, `precision "fp8" (valid: fp32, bf16, fp16)`},
		{[]string{"--data", "/nonexistent.csv", "--steps", "2", "--warmup", "0"}, "no such file"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"--local", "5000"}, "--np 0 / --local 5000: want 1..1024 ranks"},
		{[]string{"--bucket-mb", "NaN"}, "--bucket-mb NaN --first-bucket-mb 1: want each above 0 and at most 1048576"},
		{[]string{"--first-bucket-mb", "1e300"}, "want each above 0"},
		{[]string{"--lr", "Inf"}, "--lr +Inf: want a finite learning rate >= 0"},
		{[]string{"--lr", "1e39"}, "want a finite learning rate"},
		// Layer sizes whose state this host cannot hold, or whose count overflows, are
		// an error before anything is allocated, not the runtime's out-of-memory crash.
		{[]string{"--local", "1", "--dims", "524288,1048576,2", "--steps", "2", "--warmup", "0"},
			"train: --dims [524288 1048576 2]: 549758959618 parameters need at least 8192.1 GiB"},
		{[]string{"--local", "1", "--dims", "4000000000,4000000000,2", "--steps", "2", "--warmup", "0"},
			"more than 1099511627776 parameters"},
		{[]string{"--local", "1", "--dims", "1000000000000,1,1000000000", "--steps", "2", "--warmup", "0"},
			"parameters need at least"},
	} {
		_, errs, code := runMain(t, c.args...)
		require.NotZero(t, code, "%v", c.args)
		require.Contains(t, errs, c.want, "%v", c.args)
	}
	out, _, code := runMain(t, "-h")
	require.Zero(t, code)
	require.Contains(t, out, "usage: goccl train")
}

// fitsHost counts what a model's training needs against the memory it is given.
func TestFitsHost(t *testing.T) {
	// 784*1024+1024 + 1024*10+10 = 814,090 parameters, 16 bytes each, and 7,840 floats
	// of class centres: 13,056,800 bytes.
	dims := []int{784, 1024, 10}
	require.NoError(t, fitsHost(dims, 13_056_800))
	require.NoError(t, fitsHost(dims, 0)) // unknown memory: no check
	require.ErrorContains(t, fitsHost(dims, 13_056_799), "814090 parameters need at least 0.0 GiB")
}

func TestStripNP(t *testing.T) {
	require.Equal(t, []string{"--zero", "1", "--steps", "3"}, stripNP([]string{"--np", "4", "--zero", "1", "--np=2", "--steps", "3"}))
}
