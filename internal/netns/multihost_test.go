package netns_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/netns"
)

// The multi-host tests run goccl ranks as real processes in namespace hosts: shared
// memory between the ranks of one host, tcp over the bridge between hosts, a TCP store
// served by rank 0 on host 0.

var (
	buildOnce sync.Once
	rankBin   string
	buildErr  error
)

// rankProgram builds internal/netns/testprog once per test binary.
func rankProgram(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "goccl-netns-")
		if err != nil {
			buildErr = err
			return
		}
		rankBin = filepath.Join(dir, "testprog")
		out, err := exec.Command("go", "build", "-o", rankBin, "github.com/goccl/goccl/internal/netns/testprog").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build testprog: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return rankBin
}

// rank is one running rank process and what it printed.
type rank struct {
	r, host int
	cmd     *exec.Cmd
	mu      sync.Mutex
	lines   []string
	done    chan struct{}
	err     error     // from Wait
	exited  time.Time // when Wait returned
}

func (p *rank) output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// has reports whether the rank printed a line matching re.
func (p *rank) has(re *regexp.Regexp) bool {
	for _, l := range p.output() {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// cluster starts hosts x perHost ranks (rank r on host r/perHost) running testprog
// with args, with the given extra environment.
func cluster(t *testing.T, ctx context.Context, n *netns.Net, perHost int, env []string, args ...string) []*rank {
	bin := rankProgram(t)
	hosts := n.Hosts()
	w := len(hosts) * perHost
	store := hosts[0].Addr + ":29500"
	var ranks []*rank
	for r := range w {
		h := hosts[r/perHost]
		p := &rank{r: r, host: h.Index, done: make(chan struct{})}
		p.cmd = n.Command(ctx, h.Index, bin, args...)
		p.cmd.Env = append(cleanEnv(),
			fmt.Sprintf("GOCCL_RANK=%d", r), fmt.Sprintf("GOCCL_WORLD_SIZE=%d", w),
			fmt.Sprintf("GOCCL_LOCAL_RANK=%d", r%perHost), fmt.Sprintf("GOCCL_LOCAL_WORLD_SIZE=%d", perHost),
			"GOCCL_STORE="+store, fmt.Sprintf("GOCCL_HOST_ID=host%d", h.Index), "GOCCL_TCP_ADDR="+h.Addr+":0",
			"GOCCL_TRANSPORT=shm,tcp", "GOCCL_INIT_TIMEOUT=60s")
		p.cmd.Env = append(p.cmd.Env, env...)
		out, err := p.cmd.StdoutPipe()
		require.NoError(t, err)
		p.cmd.Stderr = p.cmd.Stdout
		require.NoError(t, p.cmd.Start())
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				p.mu.Lock()
				p.lines = append(p.lines, sc.Text())
				p.mu.Unlock()
			}
			p.err = p.cmd.Wait()
			p.exited = time.Now()
			close(p.done)
		}()
		ranks = append(ranks, p)
	}
	t.Cleanup(func() {
		for _, p := range ranks {
			p.cmd.Process.Kill()
			<-p.done
			if t.Failed() {
				t.Logf("rank %d (host %d) exit %v:\n  %s", p.r, p.host, p.err, strings.Join(p.output(), "\n  "))
			}
		}
	})
	return ranks
}

// cleanEnv is the environment without launcher or goccl variables.
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		if strings.HasPrefix(k, "GOCCL_") || strings.HasPrefix(k, "NETNS_") || k == "RANK" || k == "WORLD_SIZE" ||
			k == "MASTER_ADDR" || k == "MASTER_PORT" || strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "SLURM_") {
			continue
		}
		env = append(env, e)
	}
	return env
}

// waitAll waits for every rank to exit, failing the test if any is still running at
// the deadline (a hang).
func waitAll(t *testing.T, ranks []*rank, within time.Duration) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for _, p := range ranks {
		select {
		case <-p.done:
		case <-timer.C:
			t.Fatalf("rank %d (host %d) still running after %v: a hang", p.r, p.host, within)
		}
	}
}

var (
	checkOK  = regexp.MustCompile(`^CHECK-OK `)
	linkLine = regexp.MustCompile(`^LINKS rank=(\d+) host=(\S+) peers=(\S+)$`)
)

// requireLinks checks every rank's transports: shm to the ranks of its host, tcp to
// the others.
func requireLinks(t *testing.T, ranks []*rank, perHost int) {
	t.Helper()
	for _, p := range ranks {
		var peers string
		for _, l := range p.output() {
			if m := linkLine.FindStringSubmatch(l); m != nil {
				peers = m[3]
			}
		}
		require.NotEmpty(t, peers, "rank %d printed no LINKS line", p.r)
		for _, e := range strings.Split(peers, ",") {
			var peer int
			var tr string
			_, err := fmt.Sscanf(strings.Replace(e, ":", " ", 1), "%d %s", &peer, &tr)
			require.NoError(t, err, e)
			want := "tcp"
			if peer/perHost == p.r/perHost {
				want = "shm"
			}
			require.Equal(t, want, tr, "rank %d's link to rank %d", p.r, peer)
		}
	}
}

func algoOf(p *rank, kind string) string {
	re := regexp.MustCompile(`^ALGO rank=\d+ kind=` + kind + ` bytes=\d+ algo=(\S+)`)
	for _, l := range p.output() {
		if m := re.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	return ""
}

// checkTwoByTwo runs the check mode on 2 hosts x 2 ranks with GOCCL_ALGO=algo and
// requires every rank to pass it over shm inside each host and tcp between them.
func checkTwoByTwo(t *testing.T, algo string) []*rank {
	n := netns.ForTest(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ranks := cluster(t, ctx, n, 2, []string{"GOCCL_ALGO=" + algo, "GOCCL_TIMEOUT=60s"}, "-mode=check")
	waitAll(t, ranks, 150*time.Second)
	for _, p := range ranks {
		require.NoError(t, p.err, "rank %d", p.r)
		require.True(t, p.has(checkOK), "rank %d did not pass its checks", p.r)
	}
	requireLinks(t, ranks, 2)
	return ranks
}

// TestTwoHostsHier runs 2 hosts x 2 ranks with algorithm hier: AllReduce, Reduce and
// Broadcast over four dtypes, sum/avg/max, counts 0 to 4M+3, every root, against the
// float64 reference.
func TestTwoHostsHier(t *testing.T) {
	for _, p := range checkTwoByTwo(t, "hier") {
		for _, k := range []string{"allreduce", "reduce", "broadcast"} {
			require.Equal(t, "hier", algoOf(p, k), "rank %d %s", p.r, k)
		}
	}
}

// TestTwoHostsAuto runs the same checks with GOCCL_ALGO=auto. The cost model with the
// communicator's host layout must pick hier for a small AllReduce across hosts, and so
// must the communicator itself (its selector gets the layout through algos.HostModel).
func TestTwoHostsAuto(t *testing.T) {
	ranks := checkTwoByTwo(t, "auto")
	model := regexp.MustCompile(`^MODEL rank=\d+ kind=allreduce bytes=\d+ auto=hier$`)
	commHier := true
	for _, p := range ranks {
		require.True(t, p.has(model), "rank %d: the host-layout model must choose hier: %v", p.r, p.output())
		commHier = commHier && algoOf(p, "allreduce") == "hier"
	}
	require.True(t, commHier, "the communicator's own auto chose %q for a small AllReduce across hosts, want hier",
		algoOf(ranks[0], "allreduce"))
}

// TestCutHostLink unplugs host 1 while the ranks loop on 16 MiB AllReduces with hier:
// every rank, on both hosts, must fail with an error (not hang, not return a wrong
// sum) within the collective timeout plus a margin for the abort to spread.
func TestCutHostLink(t *testing.T) {
	n := netns.ForTest(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const timeout = 5 * time.Second
	ranks := cluster(t, ctx, n, 2, []string{"GOCCL_ALGO=hier", "GOCCL_TIMEOUT=" + timeout.String()},
		"-mode=loop", "-count=4194304", "-for=150s")
	started := regexp.MustCompile(`^ITER rank=\d+ iter=2$`)
	require.Eventually(t, func() bool {
		for _, p := range ranks {
			select {
			case <-p.done:
				t.Fatalf("rank %d exited before the cut: %v", p.r, p.output())
			default:
			}
			if !p.has(started) {
				return false
			}
		}
		return true
	}, 90*time.Second, 20*time.Millisecond, "every rank must finish 3 AllReduces before the cut")
	cut := time.Now()
	require.NoError(t, n.Cut(ctx, 1))
	bound := timeout + 10*time.Second
	waitAll(t, ranks, bound+5*time.Second)
	loopErr := regexp.MustCompile(`^LOOP-ERROR rank=\d+ iter=\d+ err="(.+)"$`)
	for _, p := range ranks {
		require.Error(t, p.err, "rank %d must fail after the cut", p.r)
		var msg string
		for _, l := range p.output() {
			if m := loopErr.FindStringSubmatch(l); m != nil {
				msg = m[1]
			}
		}
		require.NotEmpty(t, msg, "rank %d must report the failed AllReduce: %v", p.r, p.output())
		took := p.exited.Sub(cut)
		require.Less(t, took, bound, "rank %d took %v to fail", p.r, took)
		t.Logf("rank %d (host %d) failed %v after the cut: %s", p.r, p.host, took.Round(time.Millisecond), msg)
	}
}
