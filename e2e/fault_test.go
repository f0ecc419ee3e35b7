package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// detectBound is how long a survivor may take to turn a peer's death into an error. The
// job runs with GOCCL_TIMEOUT=60s, so meeting this bound proves detection does not wait
// for the timeout; it is generous because 8 ranks share 2 loaded cores.
const detectBound = 10 * time.Second

// faultCombo is one configuration of the fault loop.
type faultCombo struct {
	transport string
	world     int
	kind      string
	shared    bool // buffers from AllocShared: the collectives read each other's memory in place
	tuned     bool // algo_tune online: the ranks also agree on auto's choice between calls
}

func (c faultCombo) String() string {
	tr := c.transport
	if c.shared {
		tr += "-shared" // its own line in the report
	}
	if c.tuned {
		tr += "-tuned"
	}
	return fmt.Sprintf("%s/W%d/%s", tr, c.world, c.kind)
}

// trial is the outcome of one kill.
type trial struct {
	Combo     string          `json:"combo"`
	Victim    int             `json:"victim"`
	DelayMS   int             `json:"delay_ms"`
	Latencies []time.Duration `json:"latencies_ns"` // per survivor, kill to error
	Problems  []string        `json:"problems,omitempty"`
	// Misnamed are survivor errors that blame another rank than the victim. Naming is
	// best effort: when a survivor exits (or finishes a one-way collective and leaves)
	// before the root cause reaches a rank downstream of it, that rank can only blame
	// the survivor. It must stay rare; every survivor must still error in time.
	Misnamed []string `json:"misnamed,omitempty"`
}

// faultBudget is how long the fault loop may run after every combination ran once.
func faultBudget() time.Duration {
	if v := os.Getenv("E2E_FAULT_BUDGET"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	if testing.Short() {
		return 0
	}
	return 30 * time.Second
}

// TestKillRank kills one rank with SIGKILL at a random point of a loop of AllReduce,
// Broadcast, AllGather (sizes from 1 to 1M elements), Barrier, SendRecv (a ring
// shift), AllToAllV (uneven blocks) or BatchSendRecv (to and from both ring
// neighbours), over tcp and shm, with 2, 4 and 8 ranks (AllReduce at 2 and 4 also
// with algo_tune online, whose ranks exchange their timings between calls). Every survivor must fail within detectBound with an error naming the dead
// rank; goccl run must exit non-zero naming it; no rank process and no shm segment may
// be left behind. Every combination runs once, then random ones until the budget ends.
func TestKillRank(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("E2E_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (set E2E_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var combos []faultCombo
	for _, tr := range transports {
		for _, w := range []int{2, 4, 8} {
			for _, k := range []string{"allreduce", "broadcast", "allgather", "barrier", "sendrecv", "alltoallv", "batch"} {
				combos = append(combos, faultCombo{tr, w, k, false, false})
			}
		}
		for _, w := range []int{2, 4} {
			combos = append(combos, faultCombo{tr, w, "allreduce", false, true})
		}
	}
	for _, w := range []int{2, 4} {
		for _, k := range []string{"allreduce", "broadcast", "allgather"} {
			combos = append(combos, faultCombo{"shm", w, k, true, false})
		}
	}
	var trials []trial
	deadline := time.Time{}
	for i := 0; ; i++ {
		var c faultCombo
		if i < len(combos) {
			c = combos[i]
		} else {
			if deadline.IsZero() {
				deadline = time.Now().Add(faultBudget())
			}
			if !time.Now().Before(deadline) {
				break
			}
			c = combos[rng.IntN(len(combos))]
		}
		trials = append(trials, killTrial(t, rng, c))
	}
	report(t, trials)
}

// killTrial runs one job, kills one rank and checks what follows.
func killTrial(t *testing.T, rng *rand.Rand, c faultCombo) trial {
	t.Helper()
	tr := trial{Combo: c.String(), Victim: rng.IntN(c.world), DelayMS: rng.IntN(200)}
	bad := func(format string, a ...any) { tr.Problems = append(tr.Problems, fmt.Sprintf(format, a...)) }
	before := shmEntries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	j := job{n: c.world, env: []string{"GOCCL_TRANSPORT=" + c.transport, "GOCCL_TIMEOUT=60s"},
		launcher: []string{"--grace", "30s"}, args: []string{"-mode", "fault", "-kind", c.kind, "-for", "60s"}}
	if c.shared {
		j.env = append(j.env, "GOCCL_SHM_DIRECT_MIN=0") // every size reads in place
		j.args = append(j.args, "-shared")
	}
	if c.tuned {
		j.env = append(j.env, "GOCCL_ALGO_TUNE=online")
	}
	l := j.start(t, ctx)
	pids := map[int]int{}
	comm := ""
	ready := time.After(60 * time.Second)
	for len(pids) < c.world {
		select {
		case r := <-l.lines:
			if r.kind == "READY" {
				pids[r.rank] = r.int("pid")
				comm = r.kv["comm"]
			}
			if r.kind == "FAULT" || r.kind == "INIT-ERROR" {
				cancel()
				bad("rank %d failed before the kill: %s", r.rank, r.line)
				l.wait()
				return tr
			}
		case <-ready:
			cancel()
			l.wait()
			bad("ranks not ready after 60s: %s", l.snapshot())
			return tr
		}
	}
	time.Sleep(time.Duration(tr.DelayMS) * time.Millisecond)
	victimPid := pids[tr.Victim]
	require.NoError(t, syscall.Kill(victimPid, syscall.SIGKILL))
	killed := time.Now()
	faults := map[int]record{}
	limit := time.After(detectBound)
collect:
	for len(faults) < c.world-1 {
		select {
		case r := <-l.lines:
			if r.kind == "FAULT" {
				faults[r.rank] = r
			}
		case <-limit:
			break collect
		}
	}
	for r := range c.world {
		if r == tr.Victim {
			continue
		}
		f, ok := faults[r]
		if !ok {
			bad("rank %d saw no error within %v of rank %d's death", r, detectBound, tr.Victim)
			continue
		}
		ns, _ := strconv.ParseInt(f.kv["t"], 10, 64)
		tr.Latencies = append(tr.Latencies, time.Unix(0, ns).Sub(killed))
		if !namesRank(f.kv["err"], tr.Victim) {
			tr.Misnamed = append(tr.Misnamed, fmt.Sprintf("rank %d's error does not name dead rank %d: %s", r, tr.Victim, f.kv["err"]))
		}
	}
	// The survivors exit on their own (they ignore the launcher's SIGTERM), well inside
	// the launcher's 30 s grace.
	waitDone := make(chan result, 1)
	go func() { waitDone <- l.wait() }()
	var res result
	select {
	case res = <-waitDone:
	case <-time.After(detectBound):
		cancel()
		res = <-waitDone
		bad("goccl run still running %v after the kill", detectBound)
	}
	if res.code == 0 {
		bad("goccl run exited 0 after rank %d was killed", tr.Victim)
	}
	want := fmt.Sprintf("rank %d (pid %d) was killed by signal 9", tr.Victim, victimPid)
	if !strings.Contains(res.stderr, want) {
		bad("goccl run's message does not say %q:\n%s", want, lastLines(res.stderr, 3))
	}
	for r, pid := range pids {
		if !processGone(pid) {
			bad("rank %d (pid %d) still exists after goccl run exited", r, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if left := newShm(t, before, comm); len(left) > 0 {
		bad("shm segments left behind: %v", left)
	}
	return tr
}

// namesRank reports whether an error message names rank r as a rank (not as part of a
// larger number).
func namesRank(msg string, r int) bool {
	return regexp.MustCompile(`\brank ` + strconv.Itoa(r) + `\b`).MatchString(msg)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// report logs the latency summary, writes it to E2E_REPORT when set, and fails the test
// with every problem found.
func report(t *testing.T, trials []trial) {
	t.Helper()
	byTransport := map[string][]time.Duration{}
	var all []time.Duration
	var problems, misnamed []string
	for _, tr := range trials {
		for _, p := range tr.Misnamed {
			misnamed = append(misnamed, fmt.Sprintf("%s victim %d after %d ms: %s", tr.Combo, tr.Victim, tr.DelayMS, p))
		}
		tp := strings.SplitN(tr.Combo, "/", 2)[0]
		byTransport[tp] = append(byTransport[tp], tr.Latencies...)
		all = append(all, tr.Latencies...)
		for _, p := range tr.Problems {
			problems = append(problems, fmt.Sprintf("%s victim %d after %d ms: %s", tr.Combo, tr.Victim, tr.DelayMS, p))
		}
	}
	summary := map[string]any{"trials": len(trials), "survivor_errors": len(all), "problems": len(problems), "misnamed": len(misnamed)}
	for tp, ls := range byTransport {
		med, mx := stats(ls)
		summary[tp] = map[string]any{"samples": len(ls), "median_ms": ms(med), "max_ms": ms(mx)}
		t.Logf("%s: %d survivor errors, detection median %v, max %v", tp, len(ls), med, mx)
	}
	med, mx := stats(all)
	t.Logf("all: %d trials, %d survivor errors, detection median %v, max %v, %d problems", len(trials), len(all), med, mx, len(problems))
	if path := os.Getenv("E2E_REPORT"); path != "" {
		b, _ := json.MarshalIndent(map[string]any{"summary": summary, "trials": trials}, "", "  ")
		require.NoError(t, os.WriteFile(path, b, 0o644))
	}
	require.Empty(t, problems, "%d of %d trials had problems:\n%s", len(problems), len(trials), strings.Join(problems, "\n"))
	t.Logf("%d of %d survivor errors blame another rank than the victim", len(misnamed), len(all))
	for _, m := range misnamed {
		t.Log(m)
	}
	require.LessOrEqual(t, 20*len(misnamed), len(all), "more than 5%% of survivor errors blame the wrong rank")
}

func stats(ls []time.Duration) (median, maxv time.Duration) {
	if len(ls) == 0 {
		return 0, 0
	}
	s := slices.Clone(ls)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
