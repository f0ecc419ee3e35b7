package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The binaries TestMain builds.
var (
	gocclBin string
	rankBin  string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "goccl-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	gocclBin = filepath.Join(dir, "goccl")
	rankBin = filepath.Join(dir, "rankprog")
	for _, b := range []struct{ out, pkg string }{
		{gocclBin, "github.com/goccl/goccl/cmd/goccl"},
		{rankBin, "github.com/goccl/goccl/e2e/rankprog"},
	} {
		out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build %s: %v\n%s", b.pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cleanEnv is this process's environment without any launcher or goccl variable, so a
// developer's shell cannot change what a test runs.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch {
		case strings.HasPrefix(k, "GOCCL_"), strings.HasPrefix(k, "E2E_"), strings.HasPrefix(k, "OMPI_"),
			strings.HasPrefix(k, "SLURM_"), strings.HasPrefix(k, "PMI_"),
			k == "RANK", k == "WORLD_SIZE", k == "LOCAL_RANK", k == "LOCAL_WORLD_SIZE", k == "MASTER_ADDR", k == "MASTER_PORT":
			continue
		}
		env = append(env, e)
	}
	return append(env, extra...)
}

// job is one `goccl run` invocation.
type job struct {
	n        int
	env      []string // added to the clean environment
	launcher []string // flags for goccl run before --
	args     []string // rankprog flags
	timeout  time.Duration
}

func (j job) command(ctx context.Context) *exec.Cmd {
	args := append([]string{"run", "-n", strconv.Itoa(j.n)}, j.launcher...)
	args = append(append(args, "--", rankBin), j.args...)
	cmd := exec.CommandContext(ctx, gocclBin, args...)
	cmd.Env = cleanEnv(j.env...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// result is what a finished job printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

// run starts the job and waits for it; a job that outlives its timeout fails the test
// (a hang is a failure, not something to wait out).
func (j job) run(t *testing.T) result {
	t.Helper()
	if j.timeout == 0 {
		j.timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	defer cancel()
	cmd := j.command(ctx)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	start := time.Now()
	err := cmd.Run()
	res := result{stdout: o.String(), stderr: e.String(), elapsed: time.Since(start)}
	require.NoError(t, ctx.Err(), "goccl run %v hung (killed after %v)\n%s", j.args, j.timeout, res)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return res
}

// record is one parsed report line of a rank: "[rank R] KIND k=v k="quoted" ...".
type record struct {
	rank int // from the launcher's prefix
	kind string
	kv   map[string]string
	line string
}

func (r record) int(k string) int {
	v, _ := strconv.Atoi(r.kv[k])
	return v
}

var (
	prefixRe = regexp.MustCompile(`^\[rank (\d+)\] ([A-Z][A-Z0-9-]+)\b(.*)$`)
	kvRe     = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)
)

func parseLine(line string) (record, bool) {
	m := prefixRe.FindStringSubmatch(line)
	if m == nil {
		return record{}, false
	}
	r := record{kind: m[2], kv: map[string]string{}, line: line}
	r.rank, _ = strconv.Atoi(m[1])
	for _, kv := range kvRe.FindAllStringSubmatch(m[3], -1) {
		v := kv[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		r.kv[kv[1]] = v
	}
	return r, true
}

// records returns the report lines of the given kind, by rank.
func records(out, kind string) map[int]record {
	recs := map[int]record{}
	for _, line := range strings.Split(out, "\n") {
		if r, ok := parseLine(line); ok && r.kind == kind {
			recs[r.rank] = r
		}
	}
	return recs
}

// live is a job whose stdout is read while it runs.
type live struct {
	cmd   *exec.Cmd
	lines chan record
	out   bytes.Buffer // everything read so far
	mu    sync.Mutex
	err   bytes.Buffer
	done  chan struct{}
	werr  error
}

// start runs the job in the background, feeding parsed stdout records to lines.
func (j job) start(t *testing.T, ctx context.Context) *live {
	t.Helper()
	l := &live{lines: make(chan record, 1024), done: make(chan struct{})}
	l.cmd = j.command(ctx)
	l.cmd.Stderr = &syncWriter{mu: &l.mu, w: &l.err}
	pr, err := l.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, l.cmd.Start())
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			l.mu.Lock()
			l.out.WriteString(line + "\n")
			l.mu.Unlock()
			if r, ok := parseLine(line); ok {
				select {
				case l.lines <- r:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		l.werr = l.cmd.Wait()
	}()
	return l
}

// wait returns the job's result once it has exited.
func (l *live) wait() result {
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	res := result{stdout: l.out.String(), stderr: l.err.String()}
	var ee *exec.ExitError
	if errors.As(l.werr, &ee) {
		res.code = ee.ExitCode()
	} else if l.werr != nil {
		res.code = -1
	}
	return res
}

func (l *live) snapshot() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "stdout:\n" + l.out.String() + "stderr:\n" + l.err.String()
}

type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// shmEntries lists goccl's segment names in /dev/shm.
func shmEntries(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}
	}
	require.NoError(t, err)
	out := map[string]bool{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "goccl-") {
			out[e.Name()] = true
		}
	}
	return out
}

// newShm returns the segment names of communicator comm (an id, or a name prefix of ids)
// present now that were not in before (other jobs on this machine may own the rest).
func newShm(t *testing.T, before map[string]bool, comm string) []string {
	var out []string
	for n := range shmEntries(t) {
		if !before[n] && strings.HasPrefix(n, "goccl-shm-"+comm) {
			out = append(out, n)
		}
	}
	return out
}

// processGone reports whether pid no longer runs (a zombie counts as gone only once
// reaped; goccl run reaps its ranks).
func processGone(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return errors.Is(err, os.ErrNotExist)
}

// transports are the inter-process transports every matrix and fault test runs over.
var transports = []string{"tcp", "shm"}
