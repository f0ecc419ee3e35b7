package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/goccl/goccl/transport/rendezvous"
)

// spawn re-executes this binary as n local ranks and returns the exit status of the
// whole run: rank 0's when it failed, else the first failing rank's. The ranks find
// each other through a TCP store served here. Only rank 0 prints the table, so the
// ranks' output is passed through unprefixed and stays byte-compatible.
//
// ADAPT: this is a stand-in for internal/launch (launch.Run), which `goccl run` uses;
// switch to it when it lands so both share signal forwarding and rank teardown.
func spawn(ctx context.Context, n int, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "perf: --np %d: cannot find this binary to start the ranks: %v\n", n, err)
		return ExitFailure
	}
	srv, err := rendezvous.NewTCPStoreServer("127.0.0.1:0", rendezvous.ServerOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "perf: --np %d: %v\n", n, err)
		return ExitFailure
	}
	defer srv.Close()
	cmds := make([]*exec.Cmd, n)
	for r := range n {
		c := exec.CommandContext(ctx, exe, append([]string{"perf"}, args...)...)
		c.Env = append(os.Environ(),
			"GOCCL_RANK="+strconv.Itoa(r), "GOCCL_WORLD_SIZE="+strconv.Itoa(n),
			"GOCCL_LOCAL_RANK="+strconv.Itoa(r), "GOCCL_LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			"GOCCL_STORE="+srv.Addr(), childEnv+"=1")
		c.Stdout, c.Stderr = stdout, stderr
		c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
		c.WaitDelay = 10 * time.Second
		if err := c.Start(); err != nil {
			fmt.Fprintf(stderr, "perf: starting rank %d: %v\n", r, err)
			for _, p := range cmds[:r] {
				p.Process.Kill()
				p.Wait()
			}
			return ExitFailure
		}
		cmds[r] = c
	}
	codes := make([]int, n)
	var wg sync.WaitGroup
	var once sync.Once
	stopAll := func() {
		// A rank that failed may leave the others blocked on it until their timeout;
		// give them a moment to notice, then stop them.
		time.AfterFunc(15*time.Second, func() {
			for _, c := range cmds {
				if c.ProcessState == nil {
					c.Process.Signal(syscall.SIGTERM)
				}
			}
		})
	}
	for r, c := range cmds {
		wg.Go(func() {
			err := c.Wait()
			var ee *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &ee) && ee.ExitCode() > 0:
				codes[r] = ee.ExitCode()
			default:
				codes[r] = ExitFailure
				fmt.Fprintf(stderr, "perf: rank %d (pid %d): %v\n", r, c.Process.Pid, err)
			}
			if codes[r] != 0 {
				once.Do(stopAll)
			}
		})
	}
	wg.Wait()
	if codes[0] != 0 {
		return codes[0]
	}
	for _, c := range codes {
		if c != 0 {
			return c
		}
	}
	return ExitOK
}
