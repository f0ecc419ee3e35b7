package main

import (
	"context"
	"os"

	"github.com/goccl/goccl/internal/perf"
)

func init() {
	register(command{
		name:    "perf",
		summary: "benchmark collectives and print nccl-tests' table (goccl perf all_reduce)",
		run: func(ctx context.Context, args []string) int {
			return perf.Main(ctx, args, os.Stdout, os.Stderr)
		},
	})
}
