// Command goccl is goccl's one binary: perf (nccl-tests' table), run (a launcher like
// torchrun/mpirun), train (DP/ZeRO training), info (what this host has), store (a
// standalone rendezvous store).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand. Each lives in its own file and registers itself in init.
type command struct {
	name    string
	summary string
	// run gets the arguments after the subcommand name and returns the exit status.
	run func(ctx context.Context, args []string) int
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("goccl: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// usageError marks an error caused by bad command-line input (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// exitCode maps an error to an exit status: 0 ok, 2 usage, 1 anything else.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: goccl <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'goccl <command> -h' for a command's flags.")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	name := os.Args[1]
	c, ok := commands[name]
	if !ok {
		// nccl-tests style names ("all_reduce_perf") go to perf.
		if p, isPerf := commands["perf"]; isPerf && len(name) > 5 && name[len(name)-5:] == "_perf" {
			c, ok = p, true
			os.Args = append([]string{os.Args[0], "perf", name[:len(name)-5]}, os.Args[2:]...)
		}
	}
	if !ok {
		fmt.Fprintf(os.Stderr, "goccl: unknown command %q\n\n", name)
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := c.run(ctx, os.Args[2:])
	stop()
	os.Exit(code)
}
