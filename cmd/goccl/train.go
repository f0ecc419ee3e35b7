package main

import (
	"context"
	"os"

	"github.com/goccl/goccl/dp/train"
)

func init() {
	register(command{
		name:    "train",
		summary: "train an MLP data-parallel with DDP or ZeRO 1/2/3 (goccl train --np 4 --zero 2)",
		run: func(ctx context.Context, args []string) int {
			return train.Main(ctx, args, os.Stdout, os.Stderr)
		},
	})
}
