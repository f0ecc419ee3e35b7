package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/goccl/goccl/internal/launch"
)

const runUsage = `usage: goccl run -n N [--store-port P] [--host-id ID[,ID...]] [--grace 5s] [--no-prefix] -- prog [args...]

Starts N local ranks of prog with GOCCL_RANK, GOCCL_WORLD_SIZE, GOCCL_LOCAL_RANK,
GOCCL_LOCAL_WORLD_SIZE and GOCCL_STORE set (and torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), serving their rendezvous store on
127.0.0.1. Output lines are prefixed with "[rank N] ". SIGINT and SIGTERM are forwarded
to every rank; when one rank fails the others are stopped and goccl run exits with that
rank's status. GOCCL_AUTH_TOKEN, when set, protects the store (the ranks inherit it).
--host-id sets GOCCL_HOST_ID per rank (one value for all, or one per rank) so that one
machine can pose as several hosts.`

func init() {
	register(command{name: "run", summary: "launch N local ranks of a program (like torchrun/mpirun)", run: runRun})
}

// maxRunRanks bounds -n: every rank is a process on this host (goccl perf's --np has
// the same bound).
const maxRunRanks = 1024

// checkRun says what is wrong with goccl run's flags, if anything.
func checkRun(n, port int, grace time.Duration, argv, hostIDs []string) error {
	switch {
	case n < 1 || n > maxRunRanks:
		return fmt.Errorf("-n %d: want 1..%d ranks", n, maxRunRanks)
	case len(argv) == 0:
		return fmt.Errorf("no program given (put it after --)")
	case port < 0 || port > 65535:
		return fmt.Errorf("--store-port %d: want 0..65535", port)
	case grace < 0:
		return fmt.Errorf("--grace %v: want a duration >= 0", grace)
	case len(hostIDs) != 0 && len(hostIDs) != 1 && len(hostIDs) != n:
		return fmt.Errorf("--host-id has %d values for %d ranks: give one, or one per rank", len(hostIDs), n)
	}
	return nil
}

func runRun(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("goccl run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 0, "number of ranks")
	fs.IntVar(n, "np", 0, "number of ranks (alias of -n)")
	port := fs.Int("store-port", 0, "port of the job's store (0 = any free port)")
	hostIDs := fs.String("host-id", "", "GOCCL_HOST_ID for the ranks: one value, or one per rank, comma-separated")
	grace := fs.Duration("grace", 5*time.Second, "time between SIGTERM and SIGKILL when stopping ranks")
	noPrefix := fs.Bool("no-prefix", false, "do not prefix output lines with the rank")
	verbose := fs.Bool("v", false, "log the launcher's own steps to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Println(runUsage)
			return 0
		}
		fmt.Fprintf(os.Stderr, "goccl run: %v\n%s\n", err, runUsage)
		return 2
	}
	argv := fs.Args()
	var ids []string
	if *hostIDs != "" {
		ids = strings.Split(*hostIDs, ",")
	}
	if err := checkRun(*n, *port, *grace, argv, ids); err != nil {
		fmt.Fprintf(os.Stderr, "goccl run: %v\n%s\n", err, runUsage)
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1) // SIGUSR1: every rank dumps its flight record
	defer signal.Stop(sigs)
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	opt := launch.Options{
		N: *n, Argv: argv, Prefix: !*noPrefix, StorePort: *port, Grace: *grace, Signals: sigs,
		AuthToken: []byte(os.Getenv("GOCCL_AUTH_TOKEN")),
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	if ids != nil {
		opt.RankEnv = func(r int) []string { return []string{"GOCCL_HOST_ID=" + ids[r%len(ids)]} }
	}
	// Signals are forwarded rather than cancelling the job: each rank decides how to
	// stop, and goccl run exits when they have.
	err := launch.Run(context.WithoutCancel(ctx), opt)
	if err == nil {
		return 0
	}
	fmt.Fprintf(os.Stderr, "goccl run: %v\n", err)
	var re *launch.RankError
	if errors.As(err, &re) {
		return re.ExitCode()
	}
	return 1
}
