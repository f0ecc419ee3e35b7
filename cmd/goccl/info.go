package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/goccl/goccl/internal/info"
)

func init() {
	register(command{
		name:    "info",
		summary: "what this host has: CPUs, NUMA, NICs, RDMA devices, GPUs, usable transports",
		run:     runInfo,
	})
}

func runInfo(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("goccl info", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Println("usage: goccl info [--json]")
			return 0
		}
		fmt.Fprintf(os.Stderr, "goccl info: %v\nusage: goccl info [--json]\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "goccl info: unexpected argument %q\nusage: goccl info [--json]\n", fs.Arg(0))
		return 2
	}
	r := info.Gather(ctx, info.Options{})
	var err error
	if *asJSON {
		err = r.WriteJSON(os.Stdout)
	} else {
		err = r.WriteText(os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "goccl info: %v\n", err)
		return 1
	}
	return 0
}
