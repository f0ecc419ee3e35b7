package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goccl/goccl/transport/rendezvous"
)

// Options describes a local job.
type Options struct {
	// N is the number of ranks (>= 1).
	N int
	// Argv is the program and its arguments, run once per rank.
	Argv []string
	// Env is the ranks' base environment; nil means os.Environ().
	Env []string
	// RankEnv, when set, adds variables for one rank (host ids, device ordinals ...).
	RankEnv func(rank int) []string
	// Stdout and Stderr receive the ranks' output; nil means os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
	// Prefix puts "[rank N] " in front of every output line.
	Prefix bool
	// StoreHost and StorePort are where the job's TCPStore listens (default
	// 127.0.0.1, port 0 = any free port).
	StoreHost string
	StorePort int
	// AuthToken protects the store; the ranks find it in their own environment
	// (GOCCL_AUTH_TOKEN), which Run does not change.
	AuthToken []byte
	// Signals are forwarded to every live rank (the caller subscribes, e.g. to SIGINT
	// and SIGTERM, so Run does not steal the process's signal handling).
	Signals <-chan os.Signal
	// Grace is how long ranks get between SIGTERM and SIGKILL when the job is stopped
	// (default 5 s).
	Grace time.Duration
	// Logger receives the launcher's own messages; nil discards.
	Logger *slog.Logger
}

// RankError says which rank ended the job and how.
type RankError struct {
	Rank   int
	Pid    int
	Code   int            // exit status, or -1 when killed by a signal
	Signal syscall.Signal // the signal that killed it, when Code is -1
	Err    error          // a start failure, when the rank never ran
	// Stopped is how many other ranks were still running and had to be stopped.
	Stopped int
}

func (e *RankError) Error() string {
	var s string
	switch {
	case e.Err != nil:
		s = fmt.Sprintf("rank %d failed to start: %v", e.Rank, e.Err)
	case e.Code == -1:
		s = fmt.Sprintf("rank %d (pid %d) was killed by signal %d (%v)", e.Rank, e.Pid, int(e.Signal), e.Signal)
	default:
		s = fmt.Sprintf("rank %d (pid %d) exited with status %d", e.Rank, e.Pid, e.Code)
	}
	if e.Stopped > 0 {
		s += fmt.Sprintf("; stopped the other %d running rank(s)", e.Stopped)
	}
	return s
}

func (e *RankError) Unwrap() error { return e.Err }

// ExitCode is the status a launcher should exit with: the rank's own status, or
// 128+signal as a shell reports it.
func (e *RankError) ExitCode() int {
	switch {
	case e.Err != nil:
		return 1
	case e.Code == -1:
		return 128 + int(e.Signal)
	case e.Code > 0:
		return e.Code
	}
	return 1
}

type rankProc struct {
	rank int
	cmd  *exec.Cmd
	outs []*lineWriter
}

type exit struct {
	rank int
	err  error
}

// settleWindow is how long a plain rank failure waits for a signal death to blame.
const settleWindow = 250 * time.Millisecond

// Run serves the job's store, starts N ranks and waits for all of them. When one rank
// fails (non-zero status or a signal) or ctx ends, the others get SIGTERM and, after
// Grace, SIGKILL. The error names the rank that caused the failure (*RankError): a rank
// killed by a signal is preferred over one that exited with an error just before.
func Run(ctx context.Context, opt Options) error {
	if opt.N < 1 {
		return fmt.Errorf("launch: -n %d: need at least one rank", opt.N)
	}
	if len(opt.Argv) == 0 {
		return errors.New("launch: no program to run (put it after --)")
	}
	if opt.Grace <= 0 {
		opt.Grace = 5 * time.Second
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opt.Stdout == nil {
		opt.Stdout = os.Stdout
	}
	if opt.Stderr == nil {
		opt.Stderr = os.Stderr
	}
	host := opt.StoreHost
	if host == "" {
		host = "127.0.0.1"
	}
	srv, err := rendezvous.NewTCPStoreServer(fmt.Sprintf("%s:%d", host, opt.StorePort), rendezvous.ServerOptions{AuthToken: opt.AuthToken, Logger: log})
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	defer srv.Close()
	path, err := exec.LookPath(opt.Argv[0])
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}

	var outMu sync.Mutex // one line at a time across all ranks
	exits := make(chan exit, opt.N)
	procs := make([]*rankProc, 0, opt.N)
	var first *RankError
	for r := range opt.N {
		p, err := start(r, path, opt, srv.Addr(), &outMu)
		if err != nil {
			first = &RankError{Rank: r, Err: err}
			break
		}
		procs = append(procs, p)
		go func() { exits <- exit{r, p.cmd.Wait()} }()
	}
	log.Info("launch: started", "ranks", len(procs), "store", srv.Addr())

	live := len(procs)
	alive := make([]bool, len(procs))
	for i := range alive {
		alive[i] = true
	}
	signalAll := func(sig syscall.Signal) {
		for i, p := range procs {
			if alive[i] {
				// The rank leads its own process group: the signal reaches its children too.
				_ = syscall.Kill(-p.cmd.Process.Pid, sig)
			}
		}
	}
	var kill, settle <-chan time.Time
	stopping := false
	stop := func() {
		if !stopping {
			stopping = true
			signalAll(syscall.SIGTERM)
			kill = time.After(opt.Grace)
		}
	}
	if first != nil {
		first.Stopped = live
		stop()
	}
	done, cancelled := ctx.Done(), false
	for live > 0 {
		select {
		case e := <-exits:
			live--
			alive[e.rank] = false
			if errors.Is(e.err, exec.ErrWaitDelay) {
				// The rank exited but something it started still holds its output open;
				// judge the rank by its own exit status.
				log.Info("launch: a rank's children kept its output open", "rank", e.rank)
				e.err = nil
				if ps := procs[e.rank].cmd.ProcessState; ps != nil && !ps.Success() {
					e.err = &exec.ExitError{ProcessState: ps}
				}
			}
			if e.err != nil && !cancelled && !stopping { // after a cancel or stop, exits are ours
				re := rankError(procs[e.rank], e.err)
				switch {
				case first == nil && re.Code == -1:
					// Killed by a signal nobody here sent: the cause. Stop the job now.
					first = re
					first.Stopped = live
					log.Info("launch: rank failed; stopping the job", "err", first.Error())
					stop()
				case first == nil:
					// A plain failure may be a survivor that noticed a killed peer first:
					// give the killed rank's exit a moment to arrive and be blamed instead.
					first = re
					first.Stopped = live
					settle = time.After(settleWindow)
				case settle != nil && re.Code == -1:
					re.Stopped = first.Stopped
					first = re
				}
			}
		case sig := <-opt.Signals:
			if s, ok := sig.(syscall.Signal); ok {
				log.Info("launch: forwarding signal", "signal", s)
				signalAll(s)
			}
		case <-done:
			done, cancelled = nil, true
			stop()
		case <-settle:
			settle = nil
			log.Info("launch: rank failed; stopping the job", "err", first.Error())
			stop()
		case <-kill:
			signalAll(syscall.SIGKILL)
			kill = nil
		}
	}
	for _, p := range procs {
		for _, w := range p.outs {
			w.Flush()
		}
	}
	if first != nil {
		return first
	}
	if ctx.Err() != nil {
		return fmt.Errorf("launch: stopped %d rank(s): %w", len(procs), context.Cause(ctx))
	}
	return nil
}

func rankError(p *rankProc, err error) *RankError {
	re := &RankError{Rank: p.rank, Pid: p.cmd.Process.Pid, Code: -1}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			re.Signal = ws.Signal()
			return re
		}
		re.Code = ee.ExitCode()
		return re
	}
	re.Err = err
	return re
}

// start launches rank r with the launcher variables of goccl and torchrun.
func start(r int, path string, opt Options, store string, outMu *sync.Mutex) (*rankProc, error) {
	cmd := exec.Command(path, opt.Argv[1:]...)
	cmd.Args[0] = opt.Argv[0]
	env := opt.Env
	if env == nil {
		env = os.Environ()
	}
	host, port := splitAddr(store)
	n := strconv.Itoa(opt.N)
	rs := strconv.Itoa(r)
	env = append(append([]string{}, env...), rankThreads(env, opt.N)...)
	env = append(env,
		"GOCCL_RANK="+rs, "GOCCL_WORLD_SIZE="+n, "GOCCL_LOCAL_RANK="+rs, "GOCCL_LOCAL_WORLD_SIZE="+n,
		"GOCCL_STORE="+store,
		"RANK="+rs, "WORLD_SIZE="+n, "LOCAL_RANK="+rs, "LOCAL_WORLD_SIZE="+n,
		"MASTER_ADDR="+host, "MASTER_PORT="+port)
	if opt.RankEnv != nil {
		env = append(env, opt.RankEnv(r)...)
	}
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	p := &rankProc{rank: r, cmd: cmd}
	cmd.Stdout, cmd.Stderr = opt.Stdout, opt.Stderr
	if opt.Prefix {
		prefix := fmt.Sprintf("[rank %d] ", r)
		o, e := &lineWriter{w: opt.Stdout, mu: outMu, prefix: prefix}, &lineWriter{w: opt.Stderr, mu: outMu, prefix: prefix}
		cmd.Stdout, cmd.Stderr = o, e
		p.outs = []*lineWriter{o, e}
	}
	// A rank's own children may hold its pipes open after it exits; do not wait on them
	// forever.
	cmd.WaitDelay = opt.Grace
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// rankThreads gives each rank GOMAXPROCS = the host's CPUs / the ranks, at least 1,
// unless the environment sets GOMAXPROCS already: the ranks share this host's cores, and
// a Go runtime with more Ps than its share wakes idle threads at every goroutine hand-off
// (an asynchronous collective, the pipeline's two sides), each wake-up landing on a core
// another rank needs. torchrun sets OMP_NUM_THREADS=1 for its ranks for the same reason.
// On the 2-core VM with 2 ranks this took an 8-byte AllReduce that is issued and then
// waited for from 21-30 us to 3.7-4.9 us over shm (BENCHMARKS.md, "Speed", 8a).
func rankThreads(env []string, n int) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return nil
		}
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(max(1, runtime.NumCPU()/n))}
}

func splitAddr(a string) (string, string) {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			h := a[:i]
			if len(h) > 1 && h[0] == '[' {
				h = h[1 : len(h)-1]
			}
			return h, a[i+1:]
		}
	}
	return a, ""
}
