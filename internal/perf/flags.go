package perf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/goccl/goccl/transport"
)

// Options are the command-line settings: nccl-tests' flags with its letters and
// defaults, plus goccl's own (--np, --transport, --algo, --plot, --device, -v).
type Options struct {
	Coll *Collective

	NThreads, NGpus      int
	MinBytes, MaxBytes   int64
	StepBytes            int64
	StepFactor           int64
	Iters, Warmup        int
	AggIters, RunCycles  int
	ParallelInit         int
	Check                int
	Ops                  []transport.Op
	DTypes               []transport.DType
	Root                 int // -1: every root
	Blocking             int
	StreamNull           int
	Timeout              time.Duration // -T, 0 = none
	CPUTime              bool
	Average              int // 0 rank 0, 1 avg, 2 min, 3 max
	Unalign              int
	Register             int // -R: 2 = buffers from Comm.AllocShared (symmetric shared memory)
	PerIter              bool
	PerIterSkip          int
	JSONFile             string
	Timestamps           bool
	MinBW                float64 // NCCL_TESTS_MIN_BW; < 0 = unchecked
	NP                   int     // --np; 0 = not given
	Transports, Algos    []string
	Plot                 string
	Device               string // "host" (default) or "cuda"
	Verbose              bool
	Predict              bool  // --predict: the cost model's time after the nccl-tests columns
	SpanBytes            int64 // --span: the buffers the calls move through; 0 = -e's size
	Interleave           int   // --interleave: blocks per size in which the algorithms take turns; 0 = off
	Help                 bool
	Args                 []string // the arguments as given, for the JSON file
	npGiven, deviceGiven bool
}

// UsageError is bad command-line input; the command exits with status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, a ...any) error { return &UsageError{fmt.Sprintf(format, a...)} }

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// DefaultOptions are nccl-tests' defaults (src/common.cu).
func DefaultOptions() *Options {
	return &Options{
		NThreads: 1, NGpus: 1,
		MinBytes: 32 << 20, MaxBytes: 32 << 20, StepBytes: 1 << 20, StepFactor: 1,
		Iters: 20, Warmup: 1, AggIters: 1, RunCycles: 1, Check: 1,
		Ops: []transport.Op{transport.Sum}, DTypes: []transport.DType{transport.Float32},
		Average: 1, MinBW: -1, Device: "host",
	}
}

type optSpec struct {
	short byte
	long  string
	arg   string // the value's name in usage; "" for a switch
	help  string
	set   func(o *Options, v string) error
}

func intOpt(min, max int, dst func(o *Options) *int) func(*Options, string) error {
	return func(o *Options, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		if n < int64(min) || n > int64(max) {
			if max == math.MaxInt32 {
				return fmt.Errorf("%d is out of range (want >= %d)", n, min)
			}
			return fmt.Errorf("%d is out of range (want %d..%d)", n, min, max)
		}
		*dst(o) = int(n)
		return nil
	}
}

func sizeOpt(dst func(o *Options) *int64) func(*Options, string) error {
	return func(o *Options, v string) error {
		n, err := ParseSize(v)
		if err != nil {
			return err
		}
		*dst(o) = n
		return nil
	}
}

// zeroOnly accepts the default value of a GPU-only nccl-tests flag and refuses others.
func zeroOnly(what string) func(*Options, string) error {
	return func(o *Options, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		if n != 0 {
			return fmt.Errorf("%s is not supported by goccl perf (host memory, no CUDA graphs or NCCL registration); use 0 or leave it out", what)
		}
		return nil
	}
}

var optSpecs = []optSpec{
	{'t', "nthreads", "N", "threads per process (goccl runs one rank per process: 1)", func(o *Options, v string) error {
		if err := intOpt(1, 1, func(o *Options) *int { return &o.NThreads })(o, v); err != nil {
			return fmt.Errorf("%w; goccl runs one rank per process, use --np N for more ranks", err)
		}
		return nil
	}},
	{'g', "ngpus", "N", "GPUs per thread (1)", func(o *Options, v string) error {
		if err := intOpt(1, 1, func(o *Options) *int { return &o.NGpus })(o, v); err != nil {
			return fmt.Errorf("%w; goccl runs one rank per process, use --np N for more ranks", err)
		}
		return nil
	}},
	{'b', "minbytes", "SIZE", "smallest size (K/M/G suffixes, binary) [32M]", sizeOpt(func(o *Options) *int64 { return &o.MinBytes })},
	{'e', "maxbytes", "SIZE", "largest size [32M]", sizeOpt(func(o *Options) *int64 { return &o.MaxBytes })},
	{'i', "stepbytes", "SIZE", "additive step, used when -f <= 1 [1M]", sizeOpt(func(o *Options) *int64 { return &o.StepBytes })},
	{'f', "stepfactor", "N", "multiplicative step [1 = off]", func(o *Options, v string) error {
		var f int
		if err := intOpt(0, math.MaxInt32, func(*Options) *int { return &f })(o, v); err != nil {
			return err
		}
		o.StepFactor = int64(f)
		return nil
	}},
	{'n', "iters", "N", "timed iterations [20]", intOpt(1, math.MaxInt32, func(o *Options) *int { return &o.Iters })},
	{'w', "warmup_iters", "N", "warm-up iterations per size [1]", intOpt(0, math.MaxInt32, func(o *Options) *int { return &o.Warmup })},
	{'m', "agg_iters", "N", "operations per iteration [1]", intOpt(1, math.MaxInt32, func(o *Options) *int { return &o.AggIters })},
	{'N', "run_cycles", "N", "repeat the sweep N times, 0 = until interrupted [1]", intOpt(0, math.MaxInt32, func(o *Options) *int { return &o.RunCycles })},
	{'p', "parallel_init", "0/1", "accepted for compatibility (ranks always initialise in parallel)", intOpt(0, 1, func(o *Options) *int { return &o.ParallelInit })},
	{'c', "check", "N", "correctness checks per size, 0 = off (#wrong prints N/A) [1]", intOpt(0, math.MaxInt32, func(o *Options) *int { return &o.Check })},
	{'o', "op", "OP", "sum, prod, max, min, avg or all [sum]", func(o *Options, v string) error {
		ops, err := parseOps(v)
		o.Ops = ops
		return err
	}},
	{'d', "datatype", "TYPE", "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 or all [float]", func(o *Options, v string) error {
		ts, err := parseTypes(v)
		o.DTypes = ts
		return err
	}},
	{'r', "root", "N", "root rank of rooted collectives, -1 = every root [0]", intOpt(-1, math.MaxInt32, func(o *Options) *int { return &o.Root })},
	{'z', "blocking", "0-3", "0 issue all (async) then wait; 1 blocking call+barrier per op; 2 blocking call per op; 3 wait+barrier per iteration, barrier not timed [0]", intOpt(0, 3, func(o *Options) *int { return &o.Blocking })},
	{'y', "stream_null", "0/1", "accepted for compatibility (no CUDA streams)", intOpt(0, 1, func(o *Options) *int { return &o.StreamNull })},
	{'T', "timeout", "SEC", "abort a test that runs longer, 0 = off [0]", func(o *Options, v string) error {
		var s int
		if err := intOpt(0, math.MaxInt32, func(*Options) *int { return &s })(o, v); err != nil {
			return err
		}
		o.Timeout = time.Duration(s) * time.Second
		return nil
	}},
	{'G', "cudagraph", "N", "CUDA graph launches (not supported: 0)", zeroOnly("-G (CUDA graphs)")},
	{'C', "report_cputime", "0/1", "report the time to issue the operations instead of to complete them [0]", func(o *Options, v string) error {
		var b int
		err := intOpt(0, 1, func(*Options) *int { return &b })(o, v)
		o.CPUTime = b == 1
		return err
	}},
	{'a', "average", "0-3", "combine times across ranks: 0 rank 0, 1 average, 2 min, 3 max [1]", intOpt(0, 3, func(o *Options) *int { return &o.Average })},
	{'R', "local_register", "0-2", "buffer registration: 2 = buffers from AllocShared, which collectives read in place over shm (1, registering memory allocated elsewhere, is not supported) [0]", func(o *Options, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case err != nil || n < 0 || n > 2:
			return fmt.Errorf("%q: want 0, 1 or 2", v)
		case n == 1:
			return fmt.Errorf("-R 1 (registering buffers allocated elsewhere) is not supported: goccl can share only memory it allocates; use -R 2 (AllocShared, as ncclMemAlloc with a symmetric window)")
		}
		o.Register = n
		return nil
	}},
	{'x', "cta_policy", "N", "NCCL CTA policy (not supported)", zeroOnly("-x (CTA policy)")},
	{'D', "device_implementation", "N", "device-API kernels (not supported: 0)", zeroOnly("-D (device kernels)")},
	{'V', "device_cta_count", "N", "CTAs for -D (not supported)", func(o *Options, v string) error {
		return errors.New("-V (device CTA count) is not supported by goccl perf; leave it out")
	}},
	{'M', "memory", "0/1", "GPU memory report (not supported: 0)", zeroOnly("-M (GPU memory report)")},
	{'u', "unalign", "N", "shift buffers by N elements to test misalignment [0]", intOpt(0, 1<<20, func(o *Options) *int { return &o.Unalign })},
	{'I', "per_iter_timing", "0/1", "time every iteration; adds i_min i_max i_p99 i_cv% columns [0]", func(o *Options, v string) error {
		var b int
		err := intOpt(0, 1, func(*Options) *int { return &b })(o, v)
		o.PerIter = b == 1
		return err
	}},
	{'K', "per_iter_skip", "N", "leave the first N iterations out of the -I statistics [0]", intOpt(0, math.MaxInt32, func(o *Options) *int { return &o.PerIterSkip })},
	{'J', "output_file", "FILE.json", "also write the results as JSON", func(o *Options, v string) error {
		if !strings.HasSuffix(v, ".json") {
			return fmt.Errorf("%q does not end in .json", v)
		}
		o.JSONFile = v
		return nil
	}},
	{'S', "report_timestamps", "0/1", "add a timestamp column [0]", func(o *Options, v string) error {
		var b int
		err := intOpt(0, 1, func(*Options) *int { return &b })(o, v)
		o.Timestamps = b == 1
		return err
	}},
	{'h', "help", "", "print this help", func(o *Options, _ string) error { o.Help = true; return nil }},
	{0, "np", "N", "launch N local ranks (default: 2 when not started by a launcher)", func(o *Options, v string) error {
		o.npGiven = true
		return intOpt(1, 1024, func(o *Options) *int { return &o.NP })(o, v)
	}},
	{0, "transport", "LIST", "transports to benchmark, comma-separated (auto shm tcp rdma nccl inmem) [auto]", func(o *Options, v string) error {
		l, err := parseList(v)
		o.Transports = l
		return err
	}},
	{0, "algo", "LIST", "algorithms to benchmark, comma-separated (auto ring tree naive ...) [auto]", func(o *Options, v string) error {
		l, err := parseList(v)
		o.Algos = l
		return err
	}},
	{0, "plot", "FILE.png", "draw busbw and latency against size, one line per transport/algorithm", func(o *Options, v string) error {
		if !strings.HasSuffix(strings.ToLower(v), ".png") {
			return fmt.Errorf("%q does not end in .png", v)
		}
		o.Plot = v
		return nil
	}},
	{0, "device", "host|cuda", "where the buffers live [host]", func(o *Options, v string) error {
		if v != "host" && v != "cuda" {
			return fmt.Errorf("%q is not a device (valid: host, cuda)", v)
		}
		o.Device, o.deviceGiven = v, true
		return nil
	}},
	{'v', "verbose", "", "print per-communicator counters after each test, when the communicator has them", func(o *Options, _ string) error { o.Verbose = true; return nil }},
	{0, "span", "SIZE", "move the buffers through SIZE bytes from call to call, as a sweep up to -e SIZE would (several short sweeps then time each size as one long sweep does) [-e's size]", sizeOpt(func(o *Options) *int64 { return &o.SpanBytes })},
	{0, "interleave", "N", "time each size of every --algo in N blocks of -n/N calls, the algorithms taking turns block by block, and report each one's median block: a comparison of algorithms that the machine's drift from second to second does not move [0: one algorithm's whole report after the other's]", intOpt(0, math.MaxInt32, func(o *Options) *int { return &o.Interleave })},
	{0, "predict", "", "add the cost model's time for the algorithm that runs, its error against the out-of-place time, and that algorithm, after the table's columns", func(o *Options, _ string) error { o.Predict = true; return nil }},
}

func parseList(v string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q names nothing", v)
	}
	return out, nil
}

var opNames = "sum, prod, max, min, avg, all"

func parseOps(v string) ([]transport.Op, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "all":
		return append([]transport.Op(nil), transport.Ops...), nil
	case "mulsum":
		return nil, fmt.Errorf("mulsum (PreMulSum) is not supported by goccl (valid: %s)", opNames)
	}
	op, err := transport.ParseOp(v)
	if err != nil {
		return nil, fmt.Errorf("unknown op %q (valid: %s)", v, opNames)
	}
	return []transport.Op{op}, nil
}

var typeNames = "int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, all"

func parseTypes(v string) ([]transport.DType, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "all":
		return append([]transport.DType(nil), transport.DTypes...), nil
	case "f8e4m3", "f8e5m2":
		return nil, fmt.Errorf("%s (fp8) is not supported by goccl (valid: %s)", v, typeNames)
	}
	d, err := transport.ParseDType(v)
	if err != nil {
		return nil, fmt.Errorf("unknown datatype %q (valid: %s)", v, typeNames)
	}
	return []transport.DType{d}, nil
}

// ParseSize reads a size the way nccl-tests' parsesize does: a number, fractions
// allowed, with an optional K, M or G (binary, any case; a trailing B is ignored).
func ParseSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := 1.0
	if n := len(s); n > 1 && (s[n-1] == 'B' || s[n-1] == 'b') && strings.ContainsAny(s[n-2:n-1], "kKmMgG") {
		s = s[:n-1]
	}
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			s = strings.TrimSpace(s[:n-1])
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a size (examples: 8, 1024, 64K, 1.5M, 2G)", v)
	}
	if f < 0 {
		return 0, fmt.Errorf("%q is negative", v)
	}
	if f*mult > float64(1<<50) {
		return 0, fmt.Errorf("%q is larger than 1 PiB", v)
	}
	return int64(f * mult), nil
}

func lookupOpt(short byte, long string) *optSpec {
	for i := range optSpecs {
		if (short != 0 && optSpecs[i].short == short) || (long != "" && optSpecs[i].long == long) {
			return &optSpecs[i]
		}
	}
	return nil
}

func optName(s *optSpec) string {
	if s.short != 0 {
		return fmt.Sprintf("-%c (--%s)", s.short, s.long)
	}
	return "--" + s.long
}

// Parse reads the arguments after "perf": the collective name (first non-flag
// argument) and getopt-style flags: "-b 8", "-b8", "--minbytes 8", "--minbytes=8";
// goccl's long flags also take a single dash ("-np 4", as with mpirun).
func Parse(args []string) (*Options, error) {
	o := DefaultOptions()
	o.Args = append([]string(nil), args...)
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		var spec *optSpec
		var val string
		hasVal := false
		if strings.HasPrefix(a, "--") || (len(a) > 2 && lookupOpt(0, a[1:]) != nil && lookupOpt(0, a[1:]).short == 0) {
			name := strings.TrimLeft(a, "-")
			if k, v, ok := strings.Cut(name, "="); ok {
				name, val, hasVal = k, v, true
			}
			if spec = lookupOpt(0, name); spec == nil {
				return nil, usagef("perf: unknown flag %s (run 'goccl perf -h' for the list)", a)
			}
		} else {
			if spec = lookupOpt(a[1], ""); spec == nil {
				return nil, usagef("perf: unknown flag -%c (run 'goccl perf -h' for the list)", a[1])
			}
			if len(a) > 2 {
				val, hasVal = a[2:], true
			}
		}
		if spec.arg != "" && !hasVal {
			if i+1 >= len(args) {
				return nil, usagef("perf: flag %s needs a value (%s)", optName(spec), spec.arg)
			}
			i++
			val = args[i]
		} else if spec.arg == "" && hasVal {
			return nil, usagef("perf: flag %s takes no value, got %q", optName(spec), val)
		}
		if err := spec.set(o, val); err != nil {
			return nil, usagef("perf: flag %s: %v", optName(spec), err)
		}
	}
	if o.Help {
		return o, nil
	}
	switch len(positional) {
	case 0:
		return nil, usagef("perf: name the collective to test (valid: %s)", strings.Join(CollectiveNames(), ", "))
	case 1:
		c, err := LookupCollective(positional[0])
		if err != nil {
			return nil, &UsageError{err.Error()}
		}
		o.Coll = c
	default:
		return nil, usagef("perf: one collective at a time, got %q", positional)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *Options) validate() error {
	if _, err := Sweep(o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor); err != nil {
		return &UsageError{err.Error()}
	}
	if o.PerIterSkip > 0 && !o.PerIter {
		return usagef("perf: -K %d needs -I 1 (per-iteration timing)", o.PerIterSkip)
	}
	if o.PerIterSkip >= o.Iters {
		return usagef("perf: -K %d must be less than -n %d", o.PerIterSkip, o.Iters)
	}
	if o.Interleave > 0 {
		switch {
		case o.Interleave > o.Iters:
			return usagef("perf: --interleave %d splits -n %d calls into blocks: it must be at most -n (or give -n at least %d)", o.Interleave, o.Iters, o.Interleave)
		case o.PerIter:
			return usagef("perf: --interleave reports each algorithm's median block; it does not combine with -I 1 (per-iteration statistics)")
		case o.RunCycles != 1:
			return usagef("perf: --interleave runs the sweep once; it does not combine with -N %d (use -N 1)", o.RunCycles)
		}
	}
	return nil
}

// Usage writes the flag list.
func Usage(w io.Writer) {
	fmt.Fprintf(w, "usage: goccl perf <%s> [flags]\n", strings.Join(CollectiveNames(), "|"))
	fmt.Fprintf(w, "       (nccl-tests names such as all_reduce_perf work too)\n\nflags (nccl-tests letters and defaults):\n")
	for _, s := range optSpecs {
		name := "    --" + s.long
		if s.short != 0 {
			name = fmt.Sprintf("-%c, --%s", s.short, s.long)
		}
		if s.arg != "" {
			name += " " + s.arg
		}
		fmt.Fprintf(w, "  %-34s %s\n", name, s.help)
	}
	fmt.Fprintf(w, "\nExit status: 0 ok; 2 bad usage; 4 a test timed out (-T); 7 wrong data or\n"+
		"NCCL_TESTS_MIN_BW not met (as nccl-tests' testNumResults); 1 any other failure.\n")
}
