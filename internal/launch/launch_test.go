package launch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/launch"
	"github.com/goccl/goccl/transport/rendezvous"
)

const modeVar = "LAUNCH_TEST_MODE"

// TestMain turns the test binary into a rank when the launcher re-executes it.
func TestMain(m *testing.M) {
	if mode := os.Getenv(modeVar); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

func child(mode string) int {
	rank, _ := strconv.Atoi(os.Getenv("GOCCL_RANK"))
	switch mode {
	case "print":
		for i := range 3 {
			fmt.Printf("line %d of rank %d world=%s local=%s master=%s:%s\n", i, rank,
				os.Getenv("GOCCL_WORLD_SIZE"), os.Getenv("GOCCL_LOCAL_RANK"), os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"))
		}
		fmt.Fprintf(os.Stderr, "warning from rank %d\n", rank)
		fmt.Printf("no newline from rank %d", rank)
		return 0
	case "store":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := rendezvous.DialTCPStore(ctx, os.Getenv("GOCCL_STORE"), rendezvous.ClientOptions{})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer s.Close()
		world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
		_ = s.Set(ctx, "rank/"+strconv.Itoa(rank), []byte("here"))
		for p := range world {
			if _, err := s.Get(ctx, "rank/"+strconv.Itoa(p)); err != nil {
				fmt.Println(err)
				return 1
			}
		}
		fmt.Println("met everyone")
		return 0
	case "fail", "fail-stubborn":
		if mode == "fail-stubborn" {
			signal.Ignore(syscall.SIGTERM)
		}
		if rank == 1 {
			time.Sleep(100 * time.Millisecond)
			return 3
		}
		fmt.Println("ready")
		time.Sleep(time.Minute) // stopped by the launcher long before this
		return 0
	case "procs":
		fmt.Printf("GOMAXPROCS=%d\n", runtime.GOMAXPROCS(0))
		return 0
	case "crash":
		if rank == 0 {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(time.Minute)
		return 0
	case "signal":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT)
		fmt.Println("ready")
		select {
		case s := <-ch:
			fmt.Printf("got %v\n", s)
			return 0
		case <-time.After(time.Minute):
			return 9
		}
	}
	return 2
}

// syncBuf collects output written by several goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func opts(mode string, n int, out, errOut *syncBuf) launch.Options {
	return launch.Options{
		N: n, Argv: []string{os.Args[0], "-test.run=^$"}, Env: append(os.Environ(), modeVar+"="+mode),
		Stdout: out, Stderr: errOut, Prefix: true, Grace: 300 * time.Millisecond,
	}
}

func run(t *testing.T, o launch.Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return launch.Run(ctx, o)
}

func TestPrefixedOutput(t *testing.T) {
	var out, errOut syncBuf
	require.NoError(t, run(t, opts("print", 3, &out, &errOut)))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	sort.Strings(lines)
	var want []string
	for r := range 3 {
		for i := range 3 {
			want = append(want, fmt.Sprintf("[rank %d] line %d of rank %d world=3 local=%d master=127.0.0.1:", r, i, r, r))
		}
		want = append(want, fmt.Sprintf("[rank %d] no newline from rank %d", r, r))
	}
	sort.Strings(want)
	require.Len(t, lines, len(want), "stdout:\n%s", out.String())
	for i := range want {
		require.True(t, strings.HasPrefix(lines[i], want[i]), "line %q, want prefix %q", lines[i], want[i])
	}
	require.Regexp(t, regexp.MustCompile(`master=127\.0\.0\.1:\d+$`), lines[0])
	errLines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	sort.Strings(errLines)
	require.Equal(t, []string{"[rank 0] warning from rank 0", "[rank 1] warning from rank 1", "[rank 2] warning from rank 2"}, errLines)
}

// The launcher splits the host's CPUs among the ranks unless GOMAXPROCS is set already.
func TestRankThreads(t *testing.T) {
	cpus := runtime.NumCPU()
	withoutProcs := func(mode string) []string {
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOMAXPROCS=") {
				env = append(env, kv)
			}
		}
		return append(env, modeVar+"="+mode)
	}
	for _, tc := range []struct {
		name string
		n    int
		set  string // GOMAXPROCS in the launcher's environment, "" for none
		want int
	}{
		{"one rank gets every cpu", 1, "", cpus},
		{"two ranks share", 2, "", max(1, cpus/2)},
		{"more ranks than cpus get one each", 2*cpus + 1, "", 1},
		{"an explicit setting wins", 2, "3", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut syncBuf
			o := opts("procs", tc.n, &out, &errOut)
			o.Env = withoutProcs("procs")
			if tc.set != "" {
				o.Env = append(o.Env, "GOMAXPROCS="+tc.set)
			}
			require.NoError(t, run(t, o), "stderr: %s", errOut.String())
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, tc.n, "stdout:\n%s", out.String())
			for _, l := range lines {
				require.True(t, strings.HasSuffix(l, fmt.Sprintf("GOMAXPROCS=%d", tc.want)), "line %q, want GOMAXPROCS=%d", l, tc.want)
			}
		})
	}
}

func TestRanksShareStore(t *testing.T) {
	var out, errOut syncBuf
	require.NoError(t, run(t, opts("store", 4, &out, &errOut)), "stderr: %s", errOut.String())
	require.Equal(t, 4, strings.Count(out.String(), "met everyone"), out.String())
}

func TestFailingRankStopsJob(t *testing.T) {
	for _, mode := range []string{"fail", "fail-stubborn"} {
		t.Run(mode, func(t *testing.T) {
			var out, errOut syncBuf
			err := run(t, opts(mode, 3, &out, &errOut))
			var re *launch.RankError
			require.ErrorAs(t, err, &re)
			require.Equal(t, 1, re.Rank)
			require.Equal(t, 3, re.Code)
			require.Equal(t, 3, re.ExitCode())
			require.Equal(t, 2, re.Stopped)
			require.Greater(t, re.Pid, 0)
			require.Contains(t, err.Error(), fmt.Sprintf("rank 1 (pid %d) exited with status 3", re.Pid))
		})
	}
}

func TestKilledRank(t *testing.T) {
	var out, errOut syncBuf
	err := run(t, opts("crash", 2, &out, &errOut))
	var re *launch.RankError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 0, re.Rank)
	require.Equal(t, syscall.SIGKILL, re.Signal)
	require.Equal(t, 128+9, re.ExitCode())
	require.Contains(t, err.Error(), "killed by signal 9")
}

func TestSignalForwarding(t *testing.T) {
	var out, errOut syncBuf
	sigs := make(chan os.Signal, 1)
	o := opts("signal", 3, &out, &errOut)
	o.Signals = sigs
	errc := make(chan error, 1)
	go func() { errc <- run(t, o) }()
	require.Eventually(t, func() bool { return strings.Count(out.String(), "ready") == 3 }, 30*time.Second, 10*time.Millisecond)
	sigs <- syscall.SIGINT
	require.NoError(t, <-errc)
	require.Equal(t, 3, strings.Count(out.String(), "got interrupt"), out.String())
}

func TestCancelStopsJob(t *testing.T) {
	var out, errOut syncBuf
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- launch.Run(ctx, opts("fail-stubborn", 1, &out, &errOut)) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "ready") }, 30*time.Second, 10*time.Millisecond)
	cancel()
	err := <-errc
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), "stopped 1 rank(s)")
}

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    launch.Options
	}{
		{"no ranks", launch.Options{N: 0, Argv: []string{"true"}}},
		{"no program", launch.Options{N: 1}},
		{"missing program", launch.Options{N: 1, Argv: []string{"/nonexistent/prog"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := launch.Run(context.Background(), tc.o)
			require.Error(t, err)
			require.False(t, errors.Is(err, context.Canceled))
		})
	}
}
