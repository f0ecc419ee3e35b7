package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/direct"
	"github.com/goccl/goccl/transport"
)

// Version is goccl's version, printed in the first header line.
var Version = "0.1.0"

// Exit statuses. They follow nccl-tests' testResult_t where one exists.
const (
	ExitOK        = 0
	ExitFailure   = 1 // init failed, a peer died, an operation returned an error
	ExitUsage     = 2 // bad flags (nccl-tests uses 6; goccl's commands all use 2)
	ExitTimeout   = 4 // -T expired (testTimeout)
	ExitWrongData = 7 // wrong data or NCCL_TESTS_MIN_BW not met (testNumResults)
)

// DefaultLocalRanks is how many ranks `goccl perf` starts when it is neither given
// --np nor started by a launcher: one rank alone would measure nothing but a copy.
const DefaultLocalRanks = 2

// FaultEnv names the test-only fault hook: with GOCCL_PERF_FAULT=corrupt one rank
// flips a bit of its result before every data check, so the run must report wrong
// values and exit 7. It exists to test the checker end to end.
const FaultEnv = "GOCCL_PERF_FAULT"

// CUDAHooks is filled in by a build with CUDA support (the nccl package): DeviceInfo
// gives the "[0000:18:00] NVIDIA H200" part of a device line; Alloc returns n bytes of
// device memory for a local rank. With both set, --device cuda benchmarks device
// buffers, staging data checks through transport.DeviceStager.
var CUDAHooks struct {
	DeviceInfo func(localRank int) (pci, name string, err error)
	Alloc      func(localRank, n int) (buf transport.Buffer, free func(), err error)
}

// Main runs `goccl perf` with the arguments after "perf" and returns the exit status.
// Without --np and outside a launcher it starts DefaultLocalRanks local ranks.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "%v\nRun 'goccl perf -h' for the flags.\n", err)
		return ExitUsage
	}
	if o.Help {
		Usage(stdout)
		return ExitOK
	}
	if o.Device == "cuda" && (CUDAHooks.DeviceInfo == nil || CUDAHooks.Alloc == nil) {
		fmt.Fprintln(stderr, "perf: --device cuda needs a build with CUDA support (the nccl package); use --device host")
		return ExitUsage
	}
	if v := os.Getenv("NCCL_TESTS_MIN_BW"); v != "" {
		if _, err := fmt.Sscanf(v, "%g", &o.MinBW); err != nil {
			fmt.Fprintf(stderr, "perf: NCCL_TESTS_MIN_BW=%q is not a number\n", v)
			return ExitUsage
		}
	}
	cfg, err := goccl.LoadConfig(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "perf: %v\n", err)
		return ExitUsage
	}
	cudaLib = cfg.Params["cuda.lib"]
	underLauncher := cfg.Rank >= 0 && cfg.WorldSize > 0
	if !underLauncher && (os.Getenv(childEnv) != "" || launcherVars()) {
		// Started by a launcher (or by spawn) whose variables did not give a rank: never
		// start ranks again from here, that would multiply processes without end.
		fmt.Fprintf(stderr, "perf: started by a launcher, but the environment gives no rank and world size (%s)\n", launcherSummary())
		return ExitFailure
	}
	if underLauncher && o.npGiven {
		fmt.Fprintf(stderr, "perf: --np %d starts its own ranks, but this process is already rank %d of %d (from the environment); drop --np\n", o.NP, cfg.Rank, cfg.WorldSize)
		return ExitUsage
	}
	if !underLauncher {
		n := o.NP
		if n == 0 {
			n = DefaultLocalRanks
		}
		return spawn(ctx, n, stripNP(args), stdout, stderr)
	}
	return runRank(ctx, o, stdout, stderr)
}

// childEnv marks the ranks spawn starts, so a child can never spawn again.
const childEnv = "GOCCL_PERF_CHILD"

// launcherRankVars are the variables by which launchers tell a process its rank.
var launcherRankVars = []string{"GOCCL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}

func launcherVars() bool {
	for _, k := range launcherRankVars {
		if k == "SLURM_PROCID" && os.Getenv("SLURM_STEP_ID") == "" {
			continue // inside salloc but not srun: not a rank of a job step
		}
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

func launcherSummary() string {
	var parts []string
	for _, k := range append(launcherRankVars, childEnv) {
		if v := os.Getenv(k); v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// stripNP removes --np N from args, for the children it starts.
func stripNP(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case a == "--np" || a == "-np":
			i++
		case strings.HasPrefix(a, "--np=") || strings.HasPrefix(a, "-np="):
		default:
			out = append(out, a)
		}
	}
	return out
}

// combo is one transport/algorithm pair of the sweep.
type combo struct{ transport, algo string }

func (c combo) label() string {
	t, a := c.transport, c.algo
	if t == "" {
		t = "auto"
	}
	if a == "" {
		a = "auto"
	}
	return t + "/" + a
}

// runRank is one rank under a launcher: for every transport it creates a
// communicator, for every algorithm it runs the whole nccl-tests report.
func runRank(ctx context.Context, o *Options, stdout, stderr io.Writer) (status int) {
	transports, algos := o.Transports, o.Algos
	if len(transports) == 0 {
		transports = []string{""}
	}
	if len(algos) == 0 {
		algos = []string{""}
	}
	var comms []*goccl.Comm
	defer func() {
		for i := len(comms) - 1; i >= 0; i-- {
			comms[i].Close()
		}
	}()
	var series []Series
	status = ExitOK
	defer func() {
		// Wrong data is reported once, by rank 0, which prints the table: were the other
		// ranks to fail too, a launcher could stop rank 0 before its footer is out.
		if status == ExitWrongData && len(comms) > 0 && comms[0].Rank() != 0 {
			status = ExitOK
		}
	}()
	var hb hostBuffers
	for ti, t := range transports {
		opts := []goccl.Option{goccl.WithName(fmt.Sprintf("perf%d", ti))}
		if t != "" {
			opts = append(opts, goccl.WithTransport(t))
		}
		comm, err := goccl.Init(ctx, goccl.FromEnv(opts...))
		if err != nil {
			fmt.Fprintf(stderr, "perf: init with transport %q: %v\n", combo{t, ""}.label(), err)
			return exitFor(err)
		}
		// Kept open until the end: closing rank 0's first communicator could take a
		// store it serves with it.
		comms = append(comms, comm)
		got, code := runAlgos(ctx, comm, o, t, algos, len(transports)*len(algos) > 1, &hb, stdout, stderr)
		series = append(series, got...)
		switch {
		case code == ExitFailure || code == ExitTimeout || code == ExitUsage:
			return code
		case code != ExitOK && status == ExitOK:
			status = code
		}
	}
	if o.Plot != "" && comms[0].Rank() == 0 {
		if err := WritePlot(o.Plot, o.Coll.Program(), series); err != nil {
			fmt.Fprintf(stderr, "%v\n", err)
			if status == ExitOK {
				status = ExitFailure
			}
		}
	}
	return status
}

// runAlgos prints comm's report for every algorithm of algos (on transport t), each
// timed on its own or, with --interleave, all of them in turns first.
func runAlgos(ctx context.Context, comm *goccl.Comm, o *Options, t string, algos []string, several bool, hb *hostBuffers, stdout, stderr io.Writer) (series []Series, status int) {
	for _, a := range algos { // a bad name is a usage error before anything is timed
		if err := setAlgo(comm, a); err != nil {
			fmt.Fprintf(stderr, "perf: %v\n", err)
			return nil, ExitUsage
		}
	}
	var measured [][]Half
	if o.Interleave > 0 {
		var code int
		if measured, code = measureInterleaved(ctx, comm, o, algos, hb, stderr); code != ExitOK {
			return nil, code
		}
	}
	for ai, a := range algos {
		if err := setAlgo(comm, a); err != nil {
			fmt.Fprintf(stderr, "perf: %v\n", err)
			return series, ExitUsage
		}
		var rp *replay
		if measured != nil {
			rp = &replay{pts: measured[ai]}
		}
		cb := combo{t, a}
		res, code := runReport(ctx, comm, o, cb, several, hb, rp, stdout, stderr)
		switch {
		case code == ExitFailure || code == ExitTimeout:
			return series, code
		case code != ExitOK && status == ExitOK:
			status = code
		}
		series = append(series, Series{Label: cb.label(), Points: res})
	}
	return series, status
}

// setAlgo switches comm to algorithm a ("" keeps the configured one).
func setAlgo(comm *goccl.Comm, a string) error {
	if a == "" {
		return nil
	}
	if err := comm.SetAlgo(a); err != nil {
		return fmt.Errorf("--algo %s: %w", a, err)
	}
	return nil
}

// runExit is the exit status for an error of a test run (runAll): a test past -T is a
// timeout, bad input found that late a failure, the rest as exitFor.
func runExit(err error) int {
	if errors.Is(err, errTestTimeout) {
		return ExitTimeout
	}
	if code := exitFor(err); code != ExitUsage {
		return code
	}
	return ExitFailure
}

func exitFor(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, transport.ErrInvalid):
		return ExitUsage
	case errors.Is(err, transport.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout
	}
	return ExitFailure
}

// runReport prints one complete nccl-tests report for the communicator as it is
// configured now, and returns the out-of-place points for the plot.
func runReport(ctx context.Context, comm *goccl.Comm, o *Options, cb combo, several bool, hb *hostBuffers, rp *replay, stdout, stderr io.Writer) ([]Point, int) {
	b, err := newBench(ctx, comm, o, hb)
	if err != nil {
		fmt.Fprintf(stderr, "perf: rank %d: %v\n", comm.Rank(), err)
		return nil, exitFor(err)
	}
	b.replay = rp
	defer b.free()
	devices, err := gatherDevices(ctx, comm, o)
	if err != nil {
		fmt.Fprintf(stderr, "perf: rank %d: %v\n", comm.Rank(), err)
		return nil, exitFor(err)
	}
	if comm.Rank() == 0 {
		var js *jsonWriter
		if o.JSONFile != "" {
			path := o.JSONFile
			if several {
				path = strings.TrimSuffix(path, ".json") + "-" + strings.ReplaceAll(cb.label(), "/", "-") + ".json"
			}
			if js, err = openJSON(path); err != nil {
				fmt.Fprintf(stdout, "# skipping json output; %v\n", err)
				js = nil
			} else {
				fmt.Fprintf(stdout, "# Writing JSON output to %s\n", js.path)
				js.begin(append([]string{"goccl", "perf"}, o.Args...), os.Environ(), time.Now())
			}
		}
		b.rep = NewReport(stdout, js, o)
		b.rep.Preamble(o.Coll.Program(), Version, b.notes(cb), devices)
		b.rep.TableHeader()
	}
	runErr := b.runAll(ctx)
	// Every rank learns how many test points went wrong anywhere.
	oob, sumErr := b.sumInt(ctx, int64(b.errors))
	if runErr == nil {
		runErr = sumErr
	}
	code := ExitOK
	if oob > 0 {
		code = ExitWrongData
	}
	avg := 0.0
	if b.bwCount > 0 {
		avg = b.bwSum / float64(b.bwCount)
	}
	if o.MinBW >= 0 && avg < 0.9*o.MinBW {
		code = ExitWrongData
	}
	msg := ""
	if runErr != nil {
		msg = runErr.Error()
		code = runExit(runErr)
		if errors.Is(runErr, errTestTimeout) {
			host, _ := os.Hostname()
			fmt.Fprintf(stdout, "%s: Test timeout (%ds) %s\n", shortHost(host), int(o.Timeout/time.Second), o.Coll.Program())
		}
		fmt.Fprintf(stderr, "perf: rank %d: %v\n", comm.Rank(), runErr)
	}
	if b.rep != nil {
		b.rep.Footer(o.Coll.Program(), int(oob), avg, o.MinBW, msg)
		if b.rep.js != nil {
			if err := b.rep.js.end(time.Now()); err != nil {
				fmt.Fprintf(stderr, "%v\n", err)
			}
		}
	}
	return b.points, code
}

// CommModel is the cost model comm's auto selector compares algorithms with (with the
// eager size and chunk its ranks agreed at Init).
func CommModel(comm *goccl.Comm) (algos.CostModel, error) {
	return comm.CostModel(), nil
}

// gatherDevices collects every rank's device line on rank 0 through the
// communicator itself (nccl-tests gathers them with MPI).
func gatherDevices(ctx context.Context, comm *goccl.Comm, o *Options) ([]Device, error) {
	const recLen = 512
	host, _ := os.Hostname()
	local := comm.LocalRank()
	if local < 0 {
		local = comm.Rank()
	}
	hex, info := "host", linkSummary(comm)
	if o.Device == "cuda" {
		pci, name, err := CUDAHooks.DeviceInfo(local)
		if err != nil {
			return nil, fmt.Errorf("perf: device info of local rank %d: %w", local, err)
		}
		hex, info = pci, name
	}
	rec := fmt.Sprintf("%d\x00%s\x00%d\x00%s\x00%s", os.Getpid(), shortHost(host), local, hex, info)
	if len(rec) > recLen {
		rec = rec[:recLen]
	}
	send := make([]byte, recLen)
	copy(send, rec)
	all := make([]byte, recLen*comm.Size())
	if err := comm.AllGather(ctx, goccl.Host(send), goccl.Host(all), recLen, goccl.Uint8); err != nil {
		return nil, fmt.Errorf("perf: gathering device lines: %w", err)
	}
	devs := make([]Device, comm.Size())
	for r := range devs {
		f := strings.SplitN(strings.TrimRight(string(all[r*recLen:(r+1)*recLen]), "\x00"), "\x00", 5)
		for len(f) < 5 {
			f = append(f, "")
		}
		d := Device{Rank: r, Host: f[1], Hex: f[3], Info: f[4]}
		fmt.Sscan(f[0], &d.Pid)
		fmt.Sscan(f[2], &d.Device)
		devs[r] = d
	}
	return devs, nil
}

// linkSummary names the transports this rank's links use, in rank order ("shm",
// "shm+tcp"); "self" for a world of one.
func linkSummary(comm *goccl.Comm) string {
	var names []string
	for p := 0; p < comm.Size(); p++ {
		if p == comm.Rank() {
			continue
		}
		if n := comm.TransportOf(p); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "self"
	}
	return strings.Join(names, "+")
}

// shortHost cuts a host name at its first dot, as nccl-tests' getHostName does.
func shortHost(h string) string {
	if i := strings.IndexByte(h, '.'); i >= 0 {
		return h[:i]
	}
	return h
}

// notes are goccl's own header lines: what was requested and what runs.
func (b *bench) notes(cb combo) []string {
	c := b.comm
	t := cb.transport
	if t == "" {
		t = strings.Join(c.Config().Transports, ",")
	}
	a := cb.algo
	if a == "" {
		a = c.Config().Algo
	}
	lo, hi := b.sizes[0], b.sizes[len(b.sizes)-1]
	name := func(bytes int64) string {
		n, why := c.Algo(b.o.Coll.Kind, int(bytes))
		if n == "" {
			return "none: " + why
		}
		return n
	}
	picks := fmt.Sprintf("%s at %d B", name(lo), lo)
	if hi != lo {
		picks += fmt.Sprintf(", %s at %d B", name(hi), hi)
	}
	exe, _ := os.Executable()
	out := []string{
		fmt.Sprintf("goccl transport: %s (rank 0 links: %s)  algorithm: %s (%s)", t, linkSummary(c), a, picks),
		fmt.Sprintf("goccl ranks: %d  binary: %s", c.Size(), filepath.Base(exe)),
	}
	if b.replay != nil {
		per, calls := b.o.Iters/b.o.Interleave, "calls"
		if per == 1 && b.o.Iters%b.o.Interleave == 0 {
			calls = "call"
		}
		out = append(out, fmt.Sprintf("goccl interleave: every row was timed in %d blocks of about %d %s, this algorithm taking turns with the others of --algo block by block; the row is its median block", b.o.Interleave, per, calls))
	}
	if c.Config().AlgoTune == goccl.AlgoTuneOnline && b.o.Coll.Kind == goccl.KindAllReduce {
		out = append(out, "goccl algo_tune: online: auto times its AllReduce candidates per size class from 64 KiB and runs the one the ranks agree is fastest (the picks above are the model's until then; --predict's algo column shows the agreed choice)")
	}
	switch {
	case b.o.Register == 2 && b.shared && a == direct.Name:
		out = append(out, "goccl buffers: AllocShared (-R 2), mapped by every rank: every call reads them in place (algorithm direct)")
	case b.o.Register == 2 && b.shared && c.DirectMin() >= 0:
		out = append(out, fmt.Sprintf("goccl buffers: AllocShared (-R 2), mapped by every rank: calls of %d B and more read them in place (algorithm direct)", c.DirectMin()))
	case b.o.Register == 2:
		out = append(out, "goccl buffers: AllocShared (-R 2), not shared (not every link is shm, or shm.direct_min is off): collectives run as on other memory")
	}
	return out
}
