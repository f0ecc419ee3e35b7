package perf

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/goccl/goccl/transport"
)

// NCCLTestsVersion is the nccl-tests release whose output format goccl perf follows.
const NCCLTestsVersion = "2.19.6"

// FloatStr formats v right-aligned in width columns exactly as nccl-tests'
// getFloatStr: two decimals if they fit, else one, else none, else an exponent
// (%.1e for width >= 7, %.0e below), cut to width. So a value never widens its column.
func FloatStr(v float64, width int) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		// Go spells these +Inf/NaN; C's printf says inf/nan.
		s := "nan"
		if math.IsInf(v, 1) {
			s = "inf"
		} else if math.IsInf(v, -1) {
			s = "-inf"
		}
		return fmt.Sprintf("%*s", width, s)
	}
	for _, prec := range []int{2, 1, 0} {
		if s := fmt.Sprintf("%*.*f", width, prec, v); len(s) <= width {
			return s
		}
	}
	prec := 0
	if width >= 7 {
		prec = 1
	}
	s := fmt.Sprintf("%*.*e", width, prec, v)
	if len(s) > width { // snprintf(str, width+1, ...) truncates the same way
		s = s[:width]
	}
	return s
}

// CG formats v as C's "%g" does: 6 significant digits, trailing zeros dropped,
// exponent form when the exponent is < -4 or >= 6. (Go's %g uses the shortest
// representation instead, which would print 190.5951234 where C prints 190.595.)
func CG(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// TypeName is the name nccl-tests prints for a dtype ("float", "half", "bfloat16").
func TypeName(d transport.DType) string {
	switch d {
	case transport.Float16:
		return "half"
	case transport.Float32:
		return "float"
	case transport.Float64:
		return "double"
	}
	return d.String()
}

// Device is one line of the "Using devices" block.
type Device struct {
	Rank, Group, Pid int
	Host             string
	Device           int    // the local device (GPU ordinal, or the local rank on the host)
	Hex              string // "0000:18:00" for a GPU; "host" for host memory
	Info             string // the GPU name, or the transports this rank uses
}

// Line is the nccl-tests device line (with its newline).
func (d Device) Line() string {
	return fmt.Sprintf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n",
		d.Rank, d.Group, d.Pid, d.Host, d.Device, d.Hex, d.Info)
}

// IterStats are the -I per-iteration statistics of one half of a row, in seconds.
type IterStats struct {
	Min, Max, Avg, P50, P95, P99, Stdev float64
	CVPct                               float64
	Times                               []float64   // the per-iteration times (max over ranks)
	Skipped                             int         // -K
	PerRank                             [][]float64 // each rank's own times, for JSON
}

// Half is the out-of-place or in-place half of a row.
type Half struct {
	TimeUs       float64 // time per operation, µs (or launch time with -C 1)
	AlgBW, BusBW float64 // GB/s
	Wrong        int64   // wrong elements summed over ranks
	Checked      bool    // false with -c 0: #wrong prints N/A
	Iter         *IterStats
}

// Report writes nccl-tests' text output, and its JSON when a JSON writer is attached.
// Only rank 0 creates one.
type Report struct {
	w    io.Writer
	js   *jsonWriter
	opts *Options
	now  func() time.Time
}

// NewReport writes to w (and to js when not nil) for the given options.
func NewReport(w io.Writer, js *jsonWriter, opts *Options) *Report {
	return &Report{w: w, js: js, opts: opts, now: time.Now}
}

func (r *Report) printf(format string, a ...any) { fmt.Fprintf(r.w, format, a...) }

// Preamble prints the version line, the parameters, goccl's own notes (each a
// "# ..." line), and the device block.
func (r *Report) Preamble(program, version string, notes []string, devices []Device) {
	o := r.opts
	r.printf("# goccl perf version %s (nccl-tests %s format) nccl-headers=0 nccl-library=0\n", version, NCCLTestsVersion)
	r.printf("# Collective test starting: %s\n", program)
	step, stepKind := o.StepBytes, "bytes"
	if o.StepFactor > 1 {
		step, stepKind = o.StepFactor, "factor"
	}
	graph := 0
	r.printf("# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
		o.NThreads, o.NGpus, o.MinBytes, o.MaxBytes, step, stepKind, o.Warmup, o.Iters, o.AggIters, o.Check, graph, o.Unalign)
	switch o.Blocking {
	case 1:
		r.printf("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n")
	case 2:
		r.printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n")
	case 3:
		r.printf("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n")
	}
	if o.PerIter {
		r.printf("# Per-Iteration Report: CUDA event timing; i_* uses max over process rows")
		if o.PerIterSkip > 0 {
			r.printf("; summary skips first %d iterations", o.PerIterSkip)
		}
		r.printf(" \n")
	}
	if o.ParallelInit != 0 {
		r.printf("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n")
	}
	for _, n := range notes {
		r.printf("# %s\n", n)
	}
	r.printf("#\n")
	if js := r.js; js != nil {
		js.key("config")
		js.startObject()
		js.key("nthreads")
		js.int(o.NThreads)
		js.key("ngpus")
		js.int(o.NGpus)
		js.key("minimum_bytes")
		js.int64(o.MinBytes)
		js.key("maximum_bytes")
		js.int64(o.MaxBytes)
		if o.StepFactor > 1 {
			js.key("step_factor")
			js.int64(o.StepFactor)
		} else {
			js.key("step_bytes")
			js.int64(o.StepBytes)
		}
		for _, kv := range []struct {
			k string
			v int
		}{{"warmup_iters", o.Warmup}, {"iterations", o.Iters}, {"aggregated_iterations", o.AggIters}, {"validation", o.Check}, {"graph", graph}} {
			js.key(kv.k)
			js.int(kv.v)
		}
		js.key("blocking_collectives")
		js.boolStr(o.Blocking != 0)
		js.key("per_iter_timing")
		js.boolStr(o.PerIter)
		js.key("per_iter_skip")
		js.int(o.PerIterSkip)
		js.key("parallel_init")
		js.boolStr(o.ParallelInit != 0)
	}
	r.printf("# Using devices\n")
	for _, d := range devices {
		r.printf("%s", d.Line())
	}
	if js := r.js; js != nil {
		js.key("devices")
		js.startList()
		for _, d := range devices {
			js.startObject()
			js.key("rank")
			js.int(d.Rank)
			js.key("group")
			js.int(d.Group)
			js.key("pid")
			js.int(d.Pid)
			js.key("hostname")
			js.str(d.Host)
			js.key("device")
			js.int(d.Device)
			js.key("device_hex")
			js.str(d.Hex)
			js.key("device_info")
			js.str(d.Info)
			js.finishObject()
		}
		js.finishList()
		js.finishObject() // config
	}
}

// TableHeader prints the three header lines of the results table (with --predict, the
// model's columns after nccl-tests' own, so that parsers reading those by position
// still read them).
func (r *Report) TableHeader() {
	o := r.opts
	timeStr := "time"
	if o.CPUTime {
		timeStr = "cputime"
	}
	tsLbl, tsFmt, tsPad := "", "", 0
	if o.Timestamps {
		tsLbl, tsFmt, tsPad = "timestamp", "%Y-%m-%d %H:%M:%S", 19
	}
	var lines [3]string
	if o.PerIter {
		lines[0] = fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                in-place (+ per-iteration)", "", "", "", "", "")
		lines[1] = fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s %*s",
			"size", "count", "type", "redop", "root",
			timeStr, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
			timeStr, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", tsPad, tsLbl)
		lines[2] = fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s %*s",
			"(B)", "(elements)", "", "", "",
			"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
			"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", tsPad, tsFmt)
	} else {
		lines[0] = fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          ", "", "", "", "", "")
		lines[1] = fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s", "size", "count", "type", "redop", "root",
			timeStr, "algbw", "busbw", "#wrong", timeStr, "algbw", "busbw", "#wrong", tsPad, tsLbl)
		lines[2] = fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s", "(B)", "(elements)", "", "", "",
			"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsPad, tsFmt)
	}
	r.printf("#\n")
	for i, l := range lines {
		if o.Predict {
			l += predictHeader[i]
		}
		r.printf("%s\n", l)
	}
	if r.js != nil {
		r.js.key("results")
		r.js.startList()
	}
}

// predictHeader is what --predict adds to the three header lines.
var predictHeader = [3]string{
	"       model",
	fmt.Sprintf("  %7s  %6s  %s", "model", "error", "algo"),
	fmt.Sprintf("  %7s  %6s", "(us)", "(%)"),
}

// Prediction is the --predict part of a row: the cost model's time for the algorithm
// that ran (Algo; "" when there is none to price, e.g. an offload), and the measured
// out-of-place time it is compared with.
type Prediction struct {
	Algo       string
	TimeUs     float64
	MeasuredUs float64
}

// RowPredict prints the --predict columns (model time, its error against the
// out-of-place time, the algorithm) after the halves; call it before RowEnd.
func (r *Report) RowPredict(p Prediction) {
	switch {
	case p.Algo == "":
		r.printf("  %7s  %6s  %s", "N/A", "N/A", "none")
	default:
		errPct := math.NaN()
		if p.MeasuredUs > 0 {
			errPct = 100 * (p.TimeUs - p.MeasuredUs) / p.MeasuredUs
		}
		r.printf("  %7s  %6s  %s", FloatStr(p.TimeUs, 7), FloatStr(errPct, 6), p.Algo)
	}
	if js := r.js; js != nil {
		js.key("prediction")
		js.startObject()
		js.key("algorithm")
		js.str(p.Algo)
		js.key("time")
		if p.Algo == "" {
			js.null()
		} else {
			js.double(p.TimeUs)
		}
		js.finishObject()
	}
}

// RowStart prints the size, count, type, op and root columns of a row.
func (r *Report) RowStart(bytes, count int64, typeName, opName string, root int) {
	rootName := fmt.Sprintf("%6d", root)
	r.printf("%12d  %12d  %8s  %6s  %6s", bytes, count, typeName, opName, rootName)
	if js := r.js; js != nil {
		js.startObject()
		js.key("size")
		js.int64(bytes)
		js.key("count")
		js.int64(count)
		js.key("type")
		js.str(typeName)
		js.key("redop")
		js.str(opName)
		js.key("root")
		js.str(rootName)
	}
}

// RowHalf prints one half (out-of-place first, then in-place).
func (r *Report) RowHalf(h Half, outOfPlace bool) {
	o := r.opts
	t, a, b := FloatStr(h.TimeUs, 7), FloatStr(h.AlgBW, 6), FloatStr(h.BusBW, 6)
	if h.Checked {
		r.printf("  %7s  %6s  %6s  %6s", t, a, b, CG(float64(h.Wrong)))
	} else {
		r.printf("  %7s  %6s  %6s    N/A", t, a, b)
	}
	if o.PerIter && h.Iter != nil {
		s := h.Iter
		r.printf("  %7s  %7s  %7s  %7s", FloatStr(s.Min*1e6, 7), FloatStr(s.Max*1e6, 7), FloatStr(s.P99*1e6, 7), FloatStr(s.CVPct, 7))
	}
	if !outOfPlace && o.Timestamps {
		r.printf("%21s", r.now().Format("2006-01-02 15:04:05"))
	}
	js := r.js
	if js == nil {
		return
	}
	js.key(map[bool]string{true: "out_of_place", false: "in_place"}[outOfPlace])
	js.startObject()
	js.key(map[bool]string{true: "cpu_time", false: "time"}[o.CPUTime])
	js.double(h.TimeUs)
	js.key("alg_bw")
	js.double(h.AlgBW)
	js.key("bus_bw")
	js.double(h.BusBW)
	js.key("nwrong")
	if h.Checked {
		js.double(float64(h.Wrong))
	} else {
		js.null()
	}
	js.finishObject()
	if o.PerIter && h.Iter != nil {
		s := h.Iter
		js.key(map[bool]string{true: "out_of_place_per_iter", false: "in_place_per_iter"}[outOfPlace])
		js.startObject()
		js.key("skipped_iterations")
		js.int(s.Skipped)
		for _, kv := range []struct {
			k string
			v float64
		}{{"min_us", s.Min}, {"max_us", s.Max}, {"avg_us", s.Avg}, {"p50_us", s.P50}, {"p95_us", s.P95}, {"p99_us", s.P99}, {"stdev_us", s.Stdev}} {
			js.key(kv.k)
			js.double(kv.v * 1e6)
		}
		js.key("cv_pct")
		js.double(s.CVPct)
		js.key("times_us")
		js.startList()
		for _, t := range s.Times {
			js.double(t * 1e6)
		}
		js.finishList()
		if len(s.PerRank) > 1 {
			js.key("per_process_max_times_us")
			js.startList()
			for _, row := range s.PerRank {
				js.startList()
				for _, t := range row {
					js.double(t * 1e6)
				}
				js.finishList()
			}
			js.finishList()
		}
		js.finishObject()
	}
}

// RowEnd ends the row.
func (r *Report) RowEnd() {
	r.printf("\n")
	if js := r.js; js != nil {
		js.key("actual_iterations")
		js.int(r.opts.Iters)
		js.key("experiment_name")
		js.str("")
		js.finishObject()
	}
}

// Footer prints the two summary lines and the closing lines. errMsg, when not empty,
// becomes the "# error: ..." line.
// minBW < 0 means unchecked; otherwise the bandwidth line says OK or FAILED against
// 0.9*minBW, as nccl-tests does with NCCL_TESTS_MIN_BW.
func (r *Report) Footer(program string, outOfBounds int, avgBusBW, minBW float64, errMsg string) {
	if js := r.js; js != nil {
		js.finishList() // results
	}
	status := "OK"
	if outOfBounds != 0 {
		status = "FAILED"
	}
	r.printf("# %-20s : %d %s\n", "Out of bounds values", outOfBounds, status)
	bwStatus := ""
	if minBW >= 0 {
		bwStatus = "OK"
		if avgBusBW < minBW*0.9 {
			bwStatus = "FAILED"
		}
	}
	r.printf("# %-20s : %s %s\n", "Avg bus bandwidth", CG(avgBusBW), bwStatus)
	r.printf("#\n")
	r.printf("# Collective test concluded: %s\n", program)
	r.printf("#\n")
	if errMsg != "" {
		r.printf("# error: %s\n", strings.ReplaceAll(errMsg, "\n", " "))
	} else {
		r.printf("\n")
	}
	if js := r.js; js != nil {
		js.key("out_of_bounds")
		js.startObject()
		js.key("count")
		js.int(outOfBounds)
		js.key("okay")
		js.boolStr(outOfBounds == 0)
		js.finishObject()
		js.key("average_bus_bandwidth")
		js.startObject()
		js.key("bandwidth")
		js.double(avgBusBW)
		js.key("okay")
		if minBW < 0 {
			js.str("unchecked")
		} else {
			js.boolStr(avgBusBW >= minBW*0.9)
		}
		js.finishObject()
		js.key("errors")
		js.startList()
		js.str(errMsg) // nccl-tests writes ncclGetLastError(), "" when all went well
		js.finishList()
	}
}
