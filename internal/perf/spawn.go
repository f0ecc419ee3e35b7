package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/goccl/goccl/internal/launch"
)

// spawn re-executes this binary as n local ranks through the launcher `goccl run`
// uses, and returns the exit status of the whole run (the first failing rank's).
// Only rank 0 prints the table, so the ranks' output is not prefixed: it stays
// byte-compatible with nccl-tests.
func spawn(ctx context.Context, n int, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "perf: --np %d: cannot find this binary to start the ranks: %v\n", n, err)
		return ExitFailure
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// Signals are forwarded rather than cancelling the job: each rank stops itself
	// (its communicator turns the signal into errors on every rank), and then we exit.
	err = launch.Run(context.WithoutCancel(ctx), launch.Options{
		N:       n,
		Argv:    append([]string{exe, "perf"}, args...),
		Env:     append(os.Environ(), childEnv+"=1"),
		Stdout:  stdout,
		Stderr:  stderr,
		Signals: sigs,
	})
	if err == nil {
		return ExitOK
	}
	var re *launch.RankError
	if errors.As(err, &re) && re.ExitCode() > 0 {
		return re.ExitCode() // 7 wrong data, 4 timeout, 2 usage, as the rank said
	}
	fmt.Fprintf(stderr, "perf: %v\n", err)
	return ExitFailure
}
