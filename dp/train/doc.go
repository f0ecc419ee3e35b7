// Package train is `goccl train`: it trains dp/mlp's classifier data-parallel with DDP
// or a ZeRO stage and reports loss, step time, communication time, the share of it
// hidden behind backward, and the per-rank memory table.
//
// It runs as one rank under any launcher (goccl run, torchrun-style variables, Slurm,
// Open MPI), or starts its own ranks: --np N re-executes this binary N times through
// internal/launch, and --local runs N goroutine ranks in this process.
//
//	goccl train --np 4 --zero 2 --steps 200 --batch 32 --accum 2
package train
