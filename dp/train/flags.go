package train

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Usage is `goccl train -h`.
const Usage = `usage: goccl train [--np N | --local N] [--zero 0|1|2|3] [--steps 200] [--batch 32] [--accum 1]
                   [--dims 512,1024,1024,1024,10] [--data file.csv] [--precision fp32|bf16|fp16]
                   [--compress bf16|fp16] [--lr 1e-3] [--bucket-mb 25] [--first-bucket-mb 1]
                   [--log-every 10] [--warmup 3] [--seed 1] [--bench] [--tsv] [--device cpu|cuda] [--shared]

Trains an MLP classifier (Linear+ReLU layers, softmax cross-entropy, AdamW) with DDP
(--zero 0) or ZeRO stage 1, 2 or 3, on a deterministic synthetic data set or a CSV file
(finite numeric features, an integer label 0..2^24-1 last; a first line that is not numbers
is a header; --dims's first and last sizes then give way to the data's width and class count). A model whose training
state cannot fit in this host's memory is refused before anything is allocated. --batch is per rank and per micro-step; the
effective batch is ranks x batch x accum. Prints the loss, step time, communication time
and the share of it hidden behind computation, and each rank's memory next to the seeds'
formula. --bench also times DDP steps with synchronisation off (like PyTorch's no_sync),
so that exposed communication = step - no-sync step. --tsv prints one summary line.
--shared allocates the gradients and parameters with the communicator's AllocShared, so
that over shm their collectives read each other's memory in place (dp.Options.SharedMemory).
--device cuda keeps parameters, gradients, optimizer state and activations in GPU memory
(one GPU per rank, round-robin when ranks outnumber GPUs), with NVRTC-compiled kernels
and cuBLAS; GOCCL_CUDA_LIB, GOCCL_CUDA_DRIVER, GOCCL_CUDA_NVRTC and GOCCL_CUDA_CUBLAS
name the libraries when the search does not find them.`

type options struct {
	np, local                  int
	npGiven                    bool
	stage, steps, batch, accum int
	dims                       []int
	data, precision, compress  string
	shared                     bool
	device                     string
	params                     map[string]string // the configuration's Params (library paths for --device cuda)
	lr                         float64
	bucketMB, firstMB          float64
	logEvery, warmup           int
	seed                       uint64
	bench, tsv, help           bool
}

// maxRanks bounds --np and --local, as goccl perf bounds its --np: the ranks all run
// on this host.
const maxRanks = 1024

// maxBucketMB bounds the bucket flags (1 TiB), so that their byte counts cannot
// overflow.
const maxBucketMB = 1 << 20

func parse(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("goccl train", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.np, "np", 0, "")
	fs.IntVar(&o.local, "local", 0, "")
	fs.IntVar(&o.stage, "zero", 0, "")
	fs.IntVar(&o.steps, "steps", 200, "")
	fs.IntVar(&o.batch, "batch", 32, "")
	fs.IntVar(&o.accum, "accum", 1, "")
	dims := fs.String("dims", "512,1024,1024,1024,10", "")
	fs.StringVar(&o.data, "data", "", "")
	fs.StringVar(&o.precision, "precision", "fp32", "")
	fs.StringVar(&o.compress, "compress", "", "")
	fs.BoolVar(&o.shared, "shared", false, "")
	fs.Float64Var(&o.lr, "lr", 1e-3, "")
	fs.Float64Var(&o.bucketMB, "bucket-mb", 25, "")
	fs.Float64Var(&o.firstMB, "first-bucket-mb", 1, "")
	fs.IntVar(&o.logEvery, "log-every", 10, "")
	fs.IntVar(&o.warmup, "warmup", 3, "")
	fs.Uint64Var(&o.seed, "seed", 1, "")
	fs.BoolVar(&o.bench, "bench", false, "")
	fs.BoolVar(&o.tsv, "tsv", false, "")
	fs.StringVar(&o.device, "device", "cpu", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			o.help = true
			return o, nil
		}
		return nil, fmt.Errorf("train: %v", err)
	}
	fs.Visit(func(f *flag.Flag) { o.npGiven = o.npGiven || f.Name == "np" })
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("train: unexpected argument %q", fs.Arg(0))
	}
	for _, s := range strings.Split(*dims, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || d < 1 {
			return nil, fmt.Errorf("train: --dims %q: %q is not a positive layer size (want e.g. 512,1024,10)", *dims, s)
		}
		o.dims = append(o.dims, d)
	}
	switch {
	case o.np < 0 || o.local < 0 || o.np > maxRanks || o.local > maxRanks:
		return nil, fmt.Errorf("train: --np %d / --local %d: want 1..%d ranks", o.np, o.local, maxRanks)
	case o.np > 0 && o.local > 0:
		return nil, fmt.Errorf("train: give --np (processes) or --local (goroutines), not both")
	case o.stage < 0 || o.stage > 3:
		return nil, fmt.Errorf("train: --zero %d (valid: 0 = DDP, 1, 2, 3)", o.stage)
	case o.steps < 1 || o.batch < 1 || o.accum < 1:
		return nil, fmt.Errorf("train: --steps %d --batch %d --accum %d: each must be >= 1", o.steps, o.batch, o.accum)
	case !(o.bucketMB > 0 && o.bucketMB <= maxBucketMB) || !(o.firstMB > 0 && o.firstMB <= maxBucketMB):
		return nil, fmt.Errorf("train: --bucket-mb %g --first-bucket-mb %g: want each above 0 and at most %d", o.bucketMB, o.firstMB, maxBucketMB)
	case !(o.lr >= 0) || math.IsInf(o.lr, 0) || o.lr > math.MaxFloat32:
		return nil, fmt.Errorf("train: --lr %g: want a finite learning rate >= 0", o.lr)
	case o.logEvery < 1 || o.warmup < 0:
		return nil, fmt.Errorf("train: --log-every %d --warmup %d: want >= 1 and >= 0", o.logEvery, o.warmup)
	case o.device != "cpu" && o.device != "cuda":
		return nil, fmt.Errorf("train: --device %q (valid: cpu, cuda)", o.device)
	case o.warmup >= o.steps:
		return nil, fmt.Errorf("train: --warmup %d leaves no measured step of --steps %d", o.warmup, o.steps)
	}
	if len(o.dims) < 2 && o.data == "" {
		return nil, fmt.Errorf("train: --dims %q: want an input size, hidden sizes and a class count", *dims)
	}
	return o, nil
}

// stripNP removes --np N (or --np=N) for the ranks this process starts.
func stripNP(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--np" || a == "-np":
			i++
		case strings.HasPrefix(a, "--np=") || strings.HasPrefix(a, "-np="):
		default:
			out = append(out, a)
		}
	}
	return out
}
