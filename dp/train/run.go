package train

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/dp"
	dpcuda "github.com/goccl/goccl/dp/cuda"
	"github.com/goccl/goccl/dp/mlp"
	"github.com/goccl/goccl/internal/launch"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// childEnv marks ranks started by --np, so they never start ranks again.
const childEnv = "GOCCL_TRAIN_CHILD"

// Main runs `goccl train` with args (after the subcommand name).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "%v\nRun 'goccl train -h' for the flags.\n", err)
		return ExitUsage
	}
	if o.help {
		fmt.Fprintln(stdout, Usage)
		return ExitOK
	}
	cfg, err := goccl.LoadConfig(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "train: %v\n", err)
		return ExitUsage
	}
	o.params = cfg.Params
	underLauncher := cfg.Rank >= 0 && cfg.WorldSize > 0
	switch {
	case underLauncher && (o.npGiven || o.local > 0):
		fmt.Fprintf(stderr, "train: this process is already rank %d of %d (from the environment); drop --np/--local\n", cfg.Rank, cfg.WorldSize)
		return ExitUsage
	case !underLauncher && os.Getenv(childEnv) != "":
		fmt.Fprintf(stderr, "train: started by goccl train --np, but the environment gives no rank and world size\n")
		return ExitFailure
	case underLauncher:
		comm, err := goccl.Init(ctx, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "train: %v\n", err)
			return ExitFailure
		}
		defer comm.Close()
		out := stdout
		if comm.Rank() != 0 {
			out = io.Discard // rank 0 reports for everyone
		}
		return report(stderr, runRank(ctx, comm, o, out))
	case o.np > 1:
		return spawn(ctx, o.np, stripNP(args), stdout, stderr)
	}
	n := max(o.local, 1)
	comms, err := goccl.InitLocal(ctx, n)
	if err != nil {
		fmt.Fprintf(stderr, "train: %v\n", err)
		return ExitFailure
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			defer c.Close()
			out := io.Discard
			if r == 0 {
				out = stdout
			}
			if errs[r] = runRank(ctx, c, o, out); errs[r] != nil {
				c.Abort(errs[r]) // unblock the other goroutine ranks
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return report(stderr, err)
		}
	}
	return ExitOK
}

func report(stderr io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stderr, "train: %v\n", err)
	return ExitFailure
}

// spawn re-executes this binary as n ranks through internal/launch; only rank 0
// prints, so output is passed through unprefixed.
func spawn(ctx context.Context, n int, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "train: --np %d: cannot find this binary to start the ranks: %v\n", n, err)
		return ExitFailure
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	err = launch.Run(context.WithoutCancel(ctx), launch.Options{
		N: n, Argv: append([]string{exe, "train"}, args...), Env: append(os.Environ(), childEnv+"=1"),
		Stdout: stdout, Stderr: stderr, Signals: sigs, AuthToken: []byte(os.Getenv("GOCCL_AUTH_TOKEN")),
	})
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stderr, "train: %v\n", err)
	if re, ok := err.(*launch.RankError); ok {
		return re.ExitCode()
	}
	return ExitFailure
}

// stateBytes is the least a parameter costs the job in fp32 training: its weight,
// gradient and two AdamW moments, once across the ranks even at ZeRO stage 3.
const stateBytes = 16

// fitsHost refuses a model whose training state, with the synthetic data's class
// centres, cannot fit in mem bytes (this host's memory; 0 = unknown): such a run
// would otherwise end in the Go runtime's out-of-memory crash on every rank.
func fitsHost(dims []int, mem uint64) error {
	n, err := mlp.CountParams(dims)
	if err != nil {
		return fmt.Errorf("--dims: %w", err)
	}
	need := uint64(n)*stateBytes + 4*uint64(dims[0])*uint64(dims[len(dims)-1])
	if mem > 0 && need > mem {
		return fmt.Errorf("--dims %v: %d parameters need at least %.1f GiB for weights, gradients and AdamW moments, "+
			"more than this host's %.1f GiB", dims, n, float64(need)/(1<<30), float64(mem)/(1<<30))
	}
	return nil
}

// runRank trains on one rank; rank 0 writes the report to out.
func runRank(ctx context.Context, comm *goccl.Comm, o *options, out io.Writer) error {
	var data mlp.Dataset
	dims := append([]int(nil), o.dims...)
	if o.data != "" {
		t, err := mlp.LoadCSV(o.data)
		if err != nil {
			return err
		}
		data = t
		hidden := dims[min(1, len(dims)):max(1, len(dims)-1)]
		dims = append(append([]int{t.Dim()}, hidden...), t.Classes())
	}
	// Before the synthetic data's centres or the model are allocated.
	if err := fitsHost(dims, hostMemory()); err != nil {
		return err
	}
	if data == nil {
		s, err := mlp.NewSynthetic(dims[0], dims[len(dims)-1], o.seed)
		if err != nil {
			return err
		}
		data = s
	}
	model, err := mlp.New(dims)
	if err != nil {
		return err
	}
	hp := dp.DefaultAdamW()
	hp.LR = float32(o.lr)
	opts := dp.Options{Stage: o.stage, Precision: o.precision, Compress: o.compress, SharedMemory: o.shared,
		AccumSteps: o.accum, AdamW: &hp, BucketBytes: int(o.bucketMB * (1 << 20)), FirstBucketBytes: int(o.firstMB * (1 << 20))}
	coll := dp.Comm(comm)
	var gpu *dpcuda.Device
	if o.device == "cuda" {
		rank := comm.Config().LocalRank
		if rank < 0 {
			rank = comm.Rank()
		}
		if gpu, err = dpcuda.Open(dpcuda.Options{Ordinal: -1, Rank: rank, Params: o.params}); err != nil {
			return err
		}
		defer gpu.Close()
		opts.Device, coll = gpu, dpcuda.Collectives(coll, gpu)
	}
	eng, err := dp.NewOn(ctx, coll, model.Specs(o.seed), opts)
	if err != nil {
		return err
	}
	defer eng.Close()
	var tr interface {
		Step(ctx context.Context, step int, sync bool) (mlp.StepTimes, error)
	}
	if gpu != nil {
		ct, err := dpcuda.NewTrainer(eng, gpu, model, data, o.batch)
		if err != nil {
			return err
		}
		defer ct.Close()
		tr = ct
	} else if tr, err = mlp.NewTrainer(eng, model, data, o.batch); err != nil {
		return err
	}
	W := comm.Size()
	if !o.tsv {
		fmt.Fprintf(out, "# goccl train: MLP %v, %d parameters, %d ranks, %s, %s, batch %d x %d ranks x %d accum = %d, %d steps\n",
			dims, model.NumParams(), W, stageName(o.stage), eng.DType(), o.batch, W, o.accum, o.batch*W*o.accum, o.steps)
		fmt.Fprintf(out, "# buckets: %s\n", eng.Buckets())
		if gpu != nil {
			p := gpu.Kernels().Program()
			fmt.Fprintf(out, "# device: %s, kernels %s for sm_%d\n", gpu, p.Kind, p.Arch)
		}
		if W > 1 {
			fmt.Fprintf(out, "# transport to rank 1: %s\n", comm.TransportOf(1))
		}
		fmt.Fprintf(out, "%6s %9s %10s %10s %10s %8s\n", "step", "loss", "step_ms", "comm_ms", "exposed_ms", "hidden")
	}
	// With --bench (DDP) every step is followed by a no-sync step, so that both kinds
	// see the same machine load; the no-sync steps drift the replicas apart, which does
	// not matter for timing.
	benchNoSync := o.bench && o.stage == 0
	var times, ns []mlp.StepTimes
	for s := range o.steps {
		st, err := tr.Step(ctx, s, true)
		if err != nil {
			return fmt.Errorf("step %d: %w", s, err)
		}
		if s >= o.warmup {
			times = append(times, st)
		}
		if (s+1)%o.logEvery == 0 || s == o.steps-1 || s == 0 {
			loss := []float64{st.Loss}
			if err := goccl.AllReduceSlice(ctx, comm, loss, goccl.Avg); err != nil {
				return err
			}
			if !o.tsv {
				fmt.Fprintf(out, "%6d %9.4f %10.2f %10.2f %10.2f %7.0f%%\n", s+1, loss[0], ms(st.Total), ms(st.Comm.Comm), ms(st.Comm.Exposed), 100*st.Comm.Hidden())
			}
		}
		if benchNoSync {
			st, err := tr.Step(ctx, o.steps+s, false)
			if err != nil {
				return fmt.Errorf("no-sync step %d: %w", s, err)
			}
			if s >= o.warmup {
				ns = append(ns, st)
			}
		}
	}
	sum := summarize(times)
	var nosync float64
	if benchNoSync {
		nosync = summarize(ns).step
	}
	// The slowest rank's medians, as nccl-tests and the PyTorch script report.
	agg := []float64{sum.step, sum.comm, sum.exposed, sum.backward, nosync}
	if err := goccl.AllReduceSlice(ctx, comm, agg, goccl.Max); err != nil {
		return err
	}
	mem := eng.Memory()
	row := []int64{mem.N, mem.Padded, mem.Params, mem.Grads, mem.Master, mem.Moments, mem.WorkingPeak}
	rows := make([]int64, len(row)*W)
	if err := goccl.AllGatherSlice(ctx, comm, row, rows); err != nil {
		return err
	}
	mems := make([]dp.Memory, W)
	for r := range W {
		x := rows[r*len(row):]
		mems[r] = dp.Memory{Stage: o.stage, World: W, ElemBytes: eng.DType().Size(), N: x[0], Padded: x[1],
			Params: x[2], Grads: x[3], Master: x[4], Moments: x[5], WorkingPeak: x[6]}
	}
	hidden := 0.0
	if agg[1] > 0 {
		hidden = math.Max(0, 1-agg[2]/agg[1])
	}
	exposedDiff, fracDiff := math.NaN(), math.NaN()
	if nosync > 0 {
		exposedDiff = agg[0] - agg[4]
		fracDiff = exposedDiff / agg[0]
	}
	if o.tsv {
		fmt.Fprintf(out, "goccl_train\tnp=%d\tzero=%d\tprecision=%s\tparams=%d\tbatch=%d\tstep_ms=%.2f\tnosync_ms=%.2f\texposed_diff_ms=%.2f\texposed_diff_frac=%.3f\tcomm_ms=%.2f\texposed_ms=%.2f\texposed_frac=%.3f\thidden=%.3f\tbackward_ms=%.2f\tmem_total_B=%d\n",
			W, o.stage, eng.DType(), model.NumParams(), o.batch, agg[0], agg[4], exposedDiff, fracDiff, agg[1], agg[2], agg[2]/agg[0], hidden, agg[3], mems[0].Total())
		return nil
	}
	fmt.Fprintf(out, "\n# median over steps %d..%d, slowest rank: step %.2f ms, backward %.2f ms, communication %.2f ms, exposed %.2f ms (%.0f%% of the step), hidden %.0f%%\n",
		o.warmup+1, o.steps, agg[0], agg[3], agg[1], agg[2], 100*agg[2]/agg[0], 100*hidden)
	if nosync > 0 {
		fmt.Fprintf(out, "# no-sync step %.2f ms: exposed communication = step - no-sync = %.2f ms (%.0f%% of the step)\n", agg[4], exposedDiff, 100*fracDiff)
	}
	if eng.SkippedSteps() > 0 {
		fmt.Fprintf(out, "# fp16: %d steps skipped on overflow, loss scale now %g\n", eng.SkippedSteps(), eng.LossScale())
	}
	fmt.Fprintf(out, "\n# memory per rank (%s; formula: %s)\n%s", stageName(o.stage), formula(o.stage, eng.DType().Size()), dp.Table(mems))
	return nil
}

type summary struct{ step, comm, exposed, backward float64 }

func summarize(ts []mlp.StepTimes) summary {
	med := func(f func(mlp.StepTimes) time.Duration) float64 {
		xs := make([]float64, len(ts))
		for i, t := range ts {
			xs[i] = ms(f(t))
		}
		sort.Float64s(xs)
		if len(xs) == 0 {
			return 0
		}
		return xs[len(xs)/2]
	}
	return summary{
		step:     med(func(t mlp.StepTimes) time.Duration { return t.Total }),
		comm:     med(func(t mlp.StepTimes) time.Duration { return t.Comm.Comm }),
		exposed:  med(func(t mlp.StepTimes) time.Duration { return t.Comm.Exposed }),
		backward: med(func(t mlp.StepTimes) time.Duration { return t.Backward }),
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func stageName(s int) string {
	if s == 0 {
		return "DDP"
	}
	return fmt.Sprintf("ZeRO-%d", s)
}

func formula(stage, p int) string {
	k := "12"
	if p == 4 {
		k = "8"
	}
	return [...]string{
		fmt.Sprintf("(2*%d+%s)N", p, k), fmt.Sprintf("2*%dN + %sN/W", p, k),
		fmt.Sprintf("%dN + (%d+%s)N/W", p, p, k), fmt.Sprintf("(2*%d+%s)N/W", p, k)}[stage] + ", N padded to W per unit"
}
