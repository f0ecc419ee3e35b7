package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
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
       goccl tune --fit FILE,FILE,... [-o FILE]
       goccl tune --check FILE,FILE,...

Times AllReduce with ring, tree, naive and rd from 8 B to 128 MiB on N local ranks
(default 2) over one transport (default shm), fits the cost model the auto selector
uses (per call, per dependent hop, per message at the busiest rank, per pipelined hop,
link bandwidth, reduce rate; algos.CostModel) and writes it as JSON to FILE (default
models.json), printing every sample beside the fitted model's prediction. --quick does
what a communicator can afford at Init (4 sizes, ring, naive and rd, well under a
second). --fit starts no ranks: it fits one model per transport to the samples of
files written at several --np (so one model serves every world size on this host);
--check prints the built-in models' predictions beside those samples and, per size,
the algorithm the model picks against the fastest measured one.
Under a launcher (goccl run, torchrun, mpirun) every rank runs it itself.`

// tuneChild marks the ranks goccl tune starts, so a rank never starts ranks again.
const tuneChild = "GOCCL_TUNE_CHILD"

func runTune(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("goccl tune", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	np := fs.Int("np", 2, "local ranks to start")
	tr := fs.String("transport", "shm", "the transport to calibrate")
	out := fs.String("o", "models.json", "file to write")
	quick := fs.Bool("quick", false, "the quick calibration")
	fit := fs.String("fit", "", "refit the samples of these comma-separated files (no ranks)")
	check := fs.String("check", "", "compare the built-in models with the samples of these comma-separated files (no ranks)")
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
	if *fit != "" || *check != "" {
		var err error
		if *check != "" {
			err = checkBuiltin(strings.Split(*check, ","))
		} else {
			err = refit(strings.Split(*fit, ","), *out)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goccl tune: %v\n", err)
			if errors.Is(err, transport.ErrInvalid) || errors.Is(err, os.ErrNotExist) {
				return 2
			}
			return 1
		}
		return 0
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
	if err := printFit(m, res.FitError, []tune.Set{{World: res.World, Points: res.Samples}}); err != nil {
		return err
	}
	if res.Staged != nil {
		printStaged(*res.Staged)
	}
	fmt.Printf("# wrote %s\n", out)
	return nil
}

// refit is --fit: one model per transport from the samples of several files.
func refit(paths []string, out string) error {
	var files []tune.File
	for _, p := range paths {
		f, err := tune.Load(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	joint, err := tune.Refit(files)
	if err != nil {
		return err
	}
	if err := tune.Save(out, joint); err != nil {
		return err
	}
	for name, fm := range joint.Models {
		var sets []tune.Set
		for _, f := range files {
			if pts, ok := f.Samples[name]; ok {
				sets = append(sets, tune.Set{World: f.World, Points: pts})
			}
		}
		fmt.Printf("# goccl tune --fit: %s, worlds %v\n", name, joint.Worlds)
		if err := printFit(fm.Cost(), fm.FitError, sets); err != nil {
			return err
		}
	}
	for _, r := range joint.Staged {
		printStaged(r)
	}
	fmt.Printf("# wrote %s\n", out)
	return nil
}

// printStaged prints a staged range and the timings it was found from.
func printStaged(r tune.StagedRange) {
	fmt.Printf("# %s\n", r)
	for _, p := range r.Samples {
		fmt.Printf("  %5d %-6s %12d %14.2f\n", r.World, p.Algo, p.Bytes, p.Seconds*1e6)
	}
}

// checkBuiltin is --check: the built-in model of each transport against the samples.
func checkBuiltin(paths []string) error {
	sets := map[string][]tune.Set{}
	for _, p := range paths {
		f, err := tune.Load(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		for name, pts := range f.Samples {
			sets[name] = append(sets[name], tune.Set{World: f.World, Points: pts})
		}
	}
	for name, ss := range sets {
		m := tune.Builtin(name)
		fmt.Printf("# goccl tune --check: %s, the built-in model\n", name)
		if err := printFit(m, 0, ss); err != nil {
			return err
		}
		if err := printPicks(m, ss); err != nil {
			return err
		}
	}
	return nil
}

// printPicks prints, per world and size, the algorithm auto picks with m and how its
// measured time compares with the fastest measured.
func printPicks(m algos.CostModel, sets []tune.Set) error {
	fmt.Printf("# %5s %12s %-6s %-6s %8s\n", "ranks", "bytes", "pick", "best", "pick/best")
	for _, set := range sets {
		meas := map[int]map[string]float64{}
		var order []int
		for _, p := range set.Points {
			if meas[p.Bytes] == nil {
				meas[p.Bytes] = map[string]float64{}
				order = append(order, p.Bytes)
			}
			meas[p.Bytes][p.Algo] = p.Seconds
		}
		for _, n := range order {
			a, _, err := algos.Resolve(algos.Auto, transport.KindAllReduce, n, set.World, m) // what auto runs
			if err != nil {
				return err
			}
			pick, best := a.Name(), ""
			for a, s := range meas[n] {
				if best == "" || s < meas[n][best] {
					best = a
				}
			}
			if _, ok := meas[n][pick]; !ok {
				fmt.Printf("  %5d %12d %-6s %-6s %8s\n", set.World, n, pick, best, "unsampled")
				continue
			}
			fmt.Printf("  %5d %12d %-6s %-6s %8.2f\n", set.World, n, pick, best, meas[n][pick]/meas[n][best])
		}
	}
	return nil
}

// printFit prints the model's terms and every sample beside its prediction.
func printFit(m algos.CostModel, fitErr float64, sets []tune.Set) error {
	fmt.Printf("# model: call %v  alpha %v  overhead %v  async %v  beta %.3f GB/s  gamma %.3f GB/s  cores %d  (worst fit error %.0f%%)\n",
		m.Call, m.Alpha, m.Overhead, m.Async, m.Beta/1e9, m.Gamma/1e9, m.Cores, 100*fitErr)
	if c := m.Crowded; c != nil {
		fmt.Printf("# more ranks than cores: call %v  alpha %v  overhead %v  async %v  beta %.3f GB/s  gamma %.3f GB/s\n",
			c.Call, c.Alpha, c.Overhead, c.Async, c.Beta/1e9, c.Gamma/1e9)
	}
	fmt.Printf("# %5s %-6s %12s %14s %14s %8s\n", "ranks", "algo", "bytes", "measured(us)", "model(us)", "error")
	for _, set := range sets {
		for _, p := range set.Points {
			d, err := m.Predict(p.Algo, transport.KindAllReduce, p.Bytes, set.World)
			if err != nil {
				return err
			}
			pred := d.Seconds()
			fmt.Printf("  %5d %-6s %12d %14.2f %14.2f %7.0f%%\n", set.World, p.Algo, p.Bytes, p.Seconds*1e6, pred*1e6, 100*(pred-p.Seconds)/p.Seconds)
		}
	}
	return nil
}
