package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/internal/launch"
	"github.com/goccl/goccl/internal/tune"
	"github.com/goccl/goccl/transport"
)

func init() {
	register(command{
		name:    "tune",
		summary: "calibrate the auto selector's cost model on this host and write it to a file (goccl tune -o models.json)",
		run:     runTune,
	})
}

const tuneUsage = `usage: goccl tune [--np N] [--transport NAME] [-o FILE] [--quick]

Times AllReduce with ring, tree and naive from 8 B to 64 MiB on N local ranks (default
2) over one transport (default shm), fits the alpha-beta-gamma cost model the auto
selector uses (latency per step, link bandwidth, reduce rate) and writes it as JSON to
FILE (default models.json), printing every sample beside the fitted model's prediction.
--quick does what a communicator can afford at Init (3 sizes, ring and tree, well under
a second). Under a launcher (goccl run, torchrun, mpirun) every rank runs it itself.`

// tuneChild marks the ranks goccl tune starts, so a rank never starts ranks again.
const tuneChild = "GOCCL_TUNE_CHILD"

func runTune(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("goccl tune", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	np := fs.Int("np", 2, "local ranks to start")
	tr := fs.String("transport", "shm", "the transport to calibrate")
	out := fs.String("o", "models.json", "file to write")
	quick := fs.Bool("quick", false, "the quick calibration")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Println(tuneUsage)
			return 0
		}
		fmt.Fprintf(os.Stderr, "goccl tune: %v\n%s\n", err, tuneUsage)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "goccl tune: unexpected argument %q\n%s\n", fs.Arg(0), tuneUsage)
		return 2
	}
	if *np < 2 {
		fmt.Fprintf(os.Stderr, "goccl tune: --np %d: calibration needs at least 2 ranks\n", *np)
		return 2
	}
	if _, err := transport.Lookup(*tr); err != nil {
		fmt.Fprintf(os.Stderr, "goccl tune: --transport %s: %v\n", *tr, err)
		return 2
	}
	if os.Getenv(tuneChild) == "" && os.Getenv("GOCCL_RANK") == "" && os.Getenv("RANK") == "" &&
		os.Getenv("OMPI_COMM_WORLD_RANK") == "" && os.Getenv("SLURM_PROCID") == "" {
		return spawnTune(ctx, *np, args)
	}
	if err := tuneRank(ctx, *tr, *out, *quick); err != nil {
		fmt.Fprintf(os.Stderr, "goccl tune: %v\n", err)
		return 1
	}
	return 0
}

// spawnTune re-executes this binary as n ranks, as goccl perf does.
func spawnTune(ctx context.Context, n int, args []string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "goccl tune: cannot find this binary to start the ranks: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	err = launch.Run(context.WithoutCancel(ctx), launch.Options{
		N: n, Argv: append([]string{exe, "tune"}, args...), Env: append(os.Environ(), tuneChild+"=1"),
		Stdout: os.Stdout, Stderr: os.Stderr, Signals: sigs,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "goccl tune: %v\n", err)
		return 1
	}
	return 0
}

func tuneRank(ctx context.Context, tr, out string, quick bool) error {
	cfg := goccl.FromEnv(goccl.WithTransport(tr))
	comm, err := goccl.Init(ctx, cfg)
	if err != nil {
		return err
	}
	defer comm.Close()
	t0 := time.Now()
	res, err := tune.Calibrate(ctx, comm, tune.Options{Quick: quick, ChunkBytes: cfg.ChunkBytes, Restore: cfg.Algo})
	if err != nil {
		return err
	}
	if comm.Rank() != 0 {
		return nil
	}
	if err := tune.Save(out, res.File()); err != nil {
		return err
	}
	m := res.Models[res.Transport]
	fmt.Printf("# goccl tune: %s, %d ranks, %d samples in %v\n", res.Transport, res.World, len(res.Samples), time.Since(t0).Round(time.Millisecond))
	fmt.Printf("# model: alpha %v  beta %.3f GB/s  gamma %.3f GB/s  (worst fit error %.0f%%)\n",
		m.Alpha, m.Beta/1e9, m.Gamma/1e9, 100*res.FitError)
	fmt.Printf("# %-6s %12s %14s %14s %8s\n", "algo", "bytes", "measured(us)", "model(us)", "error")
	for _, p := range res.Samples {
		d, err := m.Predict(p.Algo, transport.KindAllReduce, p.Bytes, res.World)
		if err != nil {
			return err
		}
		pred := d.Seconds()
		fmt.Printf("  %-6s %12d %14.2f %14.2f %7.0f%%\n", p.Algo, p.Bytes, p.Seconds*1e6, pred*1e6, 100*(pred-p.Seconds)/p.Seconds)
	}
	fmt.Printf("# wrote %s\n", out)
	return nil
}
