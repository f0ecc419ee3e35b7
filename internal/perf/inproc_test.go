package perf

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/transport"
	"github.com/stretchr/testify/require"
)

// runLocal runs one report on world goroutine ranks over the inmem transport and
// returns rank 0's output and every rank's exit status.
func runLocal(t *testing.T, world int, args ...string) (string, []int) {
	t.Helper()
	ctx, o, comms := localRun(t, world, args)
	return runComms(ctx, comms, o, combo{})
}

// localRun parses args and starts world goroutine ranks over the inmem transport, closed
// (and the context cancelled, 2 minutes at most) when the test ends.
func localRun(t *testing.T, world int, args []string) (context.Context, *Options, []*goccl.Comm) {
	t.Helper()
	o, err := Parse(args)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	comms, err := goccl.InitLocal(ctx, world)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return ctx, o, comms
}

// runComms runs one report on every communicator of comms and returns rank 0's output
// and every rank's exit status.
func runComms(ctx context.Context, comms []*goccl.Comm, o *Options, cb combo) (string, []int) {
	return onRanks(comms, func(_ int, c *goccl.Comm, w io.Writer) int {
		_, code := runReport(ctx, c, o, cb, false, nil, nil, w, w)
		return code
	})
}

// onRanks runs f on every rank of comms at once, rank 0's writing to the output it
// returns (the others' to nowhere), and returns that and every rank's exit status.
func onRanks(comms []*goccl.Comm, f func(r int, c *goccl.Comm, w io.Writer) int) (string, []int) {
	var out bytes.Buffer
	codes := make([]int, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			var w io.Writer = io.Discard
			if r == 0 {
				w = &out
			}
			codes[r] = f(r, c, w)
		})
	}
	wg.Wait()
	return out.String(), codes
}

func TestInProcessEveryCollective(t *testing.T) {
	const world = 3
	for _, c := range Collectives {
		t.Run(c.Name, func(t *testing.T) {
			// Sizes 0, 1033, 2066, 3099: zero, odd, not divisible by 3; every type,
			// op and root.
			out, codes := runLocal(t, world, c.Name, "-b", "0", "-e", "4099", "-i", "1033", "-n", "2", "-w", "1",
				"-c", "1", "-d", "all", "-o", "all", "-r", "-1")
			require.Equal(t, []int{0, 0, 0}, codes, out)
			require.Contains(t, out, "# Out of bounds values : 0 OK\n")
			rows := parseRows(t, out)
			require.NotEmpty(t, rows)
			for _, r := range rows {
				require.Equal(t, "0", r.wrongOOP, "%+v", r)
				require.Equal(t, "0", r.wrIP, "%+v", r)
			}
			// 1 B, 1 KiB and a large size (1 MiB) in half precision.
			out, codes = runLocal(t, world, c.Name, "-b", "1", "-e", "1M", "-f", "1024", "-n", "1", "-w", "0", "-c", "1", "-d", "half")
			require.Equal(t, []int{0, 0, 0}, codes, out)
			rows = parseRows(t, out)
			require.Len(t, rows, 3)
			for _, r := range rows {
				require.Equal(t, "0", r.wrongOOP, "%+v", r)
				require.Equal(t, "0", r.wrIP, "%+v", r)
			}
		})
	}
}

// -z 1 and -z 2 time (and check) the blocking calls, not issue-then-wait.
func TestInProcessBlockingModes(t *testing.T) {
	const world = 3
	for _, z := range []string{"1", "2"} {
		for _, c := range Collectives {
			t.Run(c.Name+"/z"+z, func(t *testing.T) {
				out, codes := runLocal(t, world, c.Name, "-b", "0", "-e", "2066", "-i", "1033", "-n", "3", "-w", "1",
					"-c", "1", "-z", z, "-d", "float", "-o", "all", "-r", "-1")
				require.Equal(t, []int{0, 0, 0}, codes, out)
				rows := parseRows(t, out)
				require.NotEmpty(t, rows)
				for _, r := range rows {
					require.Equal(t, "0", r.wrongOOP, "%+v", r)
					require.Equal(t, "0", r.wrIP, "%+v", r)
				}
			})
		}
	}
}

func TestInProcessFaultHook(t *testing.T) {
	testFault = true
	defer func() { testFault = false }()
	out, codes := runLocal(t, 3, "reduce_scatter", "-b", "64", "-e", "256", "-f", "2", "-n", "1", "-w", "0", "-d", "bfloat16", "-o", "avg")
	require.Equal(t, []int{ExitWrongData, ExitWrongData, ExitWrongData}, codes, out)
	require.Contains(t, out, "# Out of bounds values : 6 FAILED\n")
	for _, r := range parseRows(t, out) {
		require.Equal(t, "1", r.wrongOOP)
	}
}

func TestInProcessNoCheck(t *testing.T) {
	out, codes := runLocal(t, 2, "broadcast", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-c", "0", "-r", "1")
	require.Equal(t, []int{0, 0}, codes)
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "           8") {
			line = l
		}
	}
	require.True(t, strings.HasSuffix(line, "    N/A"), "%q", line)
	require.Equal(t, 2, strings.Count(line, "N/A"))
	require.Contains(t, line, "     8             2     float    none       1")
}

// TestInProcessPredict runs --predict end to end and checks every row's model columns
// against the communicator's own model: the algorithm column is what comm.Algo says
// runs at that size (auto's choice, or the fixed algorithm), the time is that
// algorithm's prediction from CommModel, and the error is against the out-of-place
// time of the same row.
func TestInProcessPredict(t *testing.T) {
	for _, algo := range []string{"", "ring"} {
		args := []string{"all_reduce", "-b", "8", "-e", "1M", "-f", "32", "-n", "2", "-w", "1", "--predict"}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		comms, err := goccl.InitLocal(ctx, 3)
		require.NoError(t, err)
		o, err := Parse(args)
		require.NoError(t, err)
		if algo != "" {
			var wg sync.WaitGroup
			for _, c := range comms {
				wg.Go(func() { require.NoError(t, c.SetAlgo(algo)) })
			}
			wg.Wait()
		}
		text, codes := runComms(ctx, comms, o, combo{algo: algo})
		require.Equal(t, []int{ExitOK, ExitOK, ExitOK}, codes, text)
		model, err := CommModel(comms[0])
		require.NoError(t, err)
		lines := 0
		for _, l := range strings.Split(text, "\n") {
			f := strings.Fields(l)
			if len(f) != 16 || strings.HasPrefix(l, "#") {
				continue
			}
			lines++
			var bytes int
			_, err := fmt.Sscan(f[0], &bytes)
			require.NoError(t, err)
			name, _ := comms[0].Algo(goccl.KindAllReduce, bytes)
			if algo != "" {
				require.Equal(t, algo, name)
			}
			require.Equal(t, name, f[15], l)
			d, err := model.Predict(name, goccl.KindAllReduce, bytes, 3)
			require.NoError(t, err)
			require.Equal(t, FloatStr(d.Seconds()*1e6, 7), fmt.Sprintf("%7s", f[13]), l)
			var measured float64
			_, err = fmt.Sscan(f[5], &measured)
			require.NoError(t, err)
			var errPct float64
			_, err = fmt.Sscan(f[14], &errPct)
			require.NoError(t, err)
			// The printed time is rounded to 2 decimals; the error was computed before.
			want := 100 * (d.Seconds()*1e6 - measured) / measured
			require.InDelta(t, want, errPct, 0.02+0.01*100*d.Seconds()*1e6/(measured*measured), l)
		}
		require.Equal(t, 4, lines, text) // 8 B to 1 MiB by 32x: 8, 256, 8192, 262144
		for _, c := range comms {
			c.Close()
		}
		cancel()
	}
}

// TestInProcessSpan: --span moves the buffers through SIZE bytes from call to call, at
// the positions a sweep up to -e SIZE gives them, and every collective runs and checks
// out with it (a position past the buffers' end would panic in bench.buffers).
func TestInProcessSpan(t *testing.T) {
	for _, c := range Collectives {
		out, codes := runLocal(t, 3, c.Name, "-b", "0", "-e", "4099", "-i", "1033", "-n", "7", "-w", "1",
			"-c", "1", "--span", "10001")
		require.Equal(t, []int{0, 0, 0}, codes, "%s: %s", c.Name, out)
		for _, r := range parseRows(t, out) {
			require.Equal(t, "0", r.wrongOOP, "%s %+v", c.Name, r)
			require.Equal(t, "0", r.wrIP, "%s %+v", c.Name, r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comms, err := goccl.InitLocal(ctx, 1)
	require.NoError(t, err)
	defer comms[0].Close()
	bench := func(args ...string) *bench {
		o, err := Parse(append([]string{"all_reduce", "-b", "4K"}, args...))
		require.NoError(t, err)
		b, err := newBench(ctx, comms[0], o, nil)
		require.NoError(t, err)
		t.Cleanup(b.free)
		return b
	}
	long, short, below := bench("-e", "1M"), bench("-e", "64K", "--span", "1M"), bench("-e", "64K", "--span", "8K")
	k := Collectives[0].CountsFor(4<<10, 4, 1) // all_reduce
	require.Equal(t, int64(256), long.shifts(k, transport.Float32))
	require.Equal(t, long.shifts(k, transport.Float32), short.shifts(k, transport.Float32))
	require.Equal(t, int64(16), below.shifts(k, transport.Float32), "a span below -e's size leaves -e's")
	for it := range 300 {
		ls, lr := long.buffers(k, transport.Float32, false, it)
		ss, sr := short.buffers(k, transport.Float32, false, it)
		require.Equal(t, offset(t, long.sendBuf, ls), offset(t, short.sendBuf, ss), "iteration %d", it)
		require.Equal(t, offset(t, long.recvBuf, lr), offset(t, short.recvBuf, sr), "iteration %d", it)
	}
	_, err = Parse([]string{"all_reduce", "--span", "lots"})
	require.Error(t, err)
}

// offset is where part starts inside whole (both host buffers).
func offset(t *testing.T, whole, part transport.Buffer) int {
	t.Helper()
	w, p := whole.Bytes(), part.Bytes()
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(p))) - uintptr(unsafe.Pointer(unsafe.SliceData(w))))
}

// runInterleaved runs --interleave's measuring pass and every algorithm's report on
// world goroutine ranks over the inmem transport, and returns rank 0's output, every
// rank's exit status and rank 0's communicator's flight record and counters, taken
// right after the measuring pass.
func runInterleaved(t *testing.T, world int, algos []string, args ...string) (string, []int, []goccl.OpRecord, goccl.Stats) {
	t.Helper()
	ctx, o, comms := localRun(t, world, args)
	var rec []goccl.OpRecord
	var stats goccl.Stats
	out, codes := onRanks(comms, func(r int, c *goccl.Comm, w io.Writer) int {
		if err := c.SetAlgo(algos[0]); err != nil {
			return ExitUsage
		}
		measured, code := measureInterleaved(ctx, c, o, algos, nil, w)
		if r == 0 {
			rec, stats = c.FlightRecord(), c.Stats()
		}
		if code != ExitOK {
			return code
		}
		for i, a := range algos {
			if err := c.SetAlgo(a); err != nil {
				return ExitUsage
			}
			_, got := runReport(ctx, c, o, combo{"", a}, true, nil, &replay{pts: measured[i]}, w, w)
			code = max(code, got)
		}
		return code
	})
	return out, codes, rec, stats
}

// reports splits perf's output into its reports, by the algorithm line of each header.
func reports(out string) map[string]string {
	m := map[string]string{}
	for _, rep := range strings.Split(out, "# Collective test starting")[1:] {
		i := strings.Index(rep, "algorithm: ")
		if i < 0 {
			continue
		}
		a := strings.Fields(rep[i+len("algorithm: "):])[0]
		m[a] = rep
	}
	return m
}

// TestInterleaveReports: every algorithm gets a whole report of checked rows, over sizes
// 0, odd and not divisible by the world size (an additive sweep), and 1 B, 1 KiB and
// 1 MiB (a geometric one), in every type, and each report says how its rows were timed.
func TestInterleaveReports(t *testing.T) {
	algos := []string{"ring", "naive", "rd"}
	for _, sweep := range [][]string{{"-b", "0", "-e", "1M", "-i", "349529"}, {"-b", "1", "-e", "1M", "-f", "1024"}} {
		args := append([]string{"all_reduce", "-n", "3", "-w", "1", "--interleave", "3", "-c", "1", "-d", "all"}, sweep...)
		out, codes, _, stats := runInterleaved(t, 3, algos, args...)
		require.Equal(t, []int{0, 0, 0}, codes, out)
		o, err := Parse(args)
		require.NoError(t, err)
		want, err := Sweep(o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor)
		require.NoError(t, err)
		reps := reports(out)
		require.Len(t, reps, len(algos), out)
		for _, a := range algos {
			rep := reps[a]
			require.Contains(t, rep, "goccl interleave: every row was timed in 3 blocks of about 1 call,", a)
			require.Contains(t, rep, "# Out of bounds values : 0 OK\n", a)
			rows := parseRows(t, rep)
			require.Len(t, rows, len(want)*len(transport.DTypes), a)
			var sizes []int64
			for _, r := range rows {
				require.Equal(t, "0", r.wrongOOP, "%s %+v", a, r)
				require.Equal(t, "0", r.wrIP, "%s %+v", a, r)
				if r.typ == "int8" {
					sizes = append(sizes, r.size)
				}
			}
			require.Equal(t, want, sizes, a)
		}
		// Every algorithm passed the same bytes in the measuring pass. (Their calls
		// differ: a Barrier counts under the algorithm that runs it, naive's for ring.)
		moved := stats.ByAlgo[algos[0]].Bytes
		require.NotZero(t, moved)
		for _, a := range algos[1:] {
			require.Equal(t, moved, stats.ByAlgo[a].Bytes, "%s against %s: %+v", a, algos[0], stats.ByAlgo)
		}
	}
}

// TestInterleaveTurns reads the measuring pass's order from the flight record: per half,
// blocks of one untimed call and -n/N timed ones per algorithm, the order rotating from
// block to block and reversed in the second round of rotations.
func TestInterleaveTurns(t *testing.T) {
	algos := []string{"ring", "naive"}
	out, codes, rec, _ := runInterleaved(t, 3, algos, "all_reduce", "-b", "8", "-e", "8", "-n", "8", "-w", "0",
		"--interleave", "4", "-c", "0")
	require.Equal(t, []int{0, 0, 0}, codes, out)
	var got []string
	for _, r := range rec {
		if r.Op == "allreduce float32 sum count=2" { // the timed calls; the times are combined in float64
			got = append(got, r.Algo)
		}
	}
	// Blocks 0-3: ring naive, naive ring, then reversed: naive ring, ring naive; each
	// block one untimed call and 2 timed ones. The flight record holds the in-place
	// half's whole, the last.
	var want []string
	for _, order := range [][]string{{"ring", "naive"}, {"naive", "ring"}, {"naive", "ring"}, {"ring", "naive"}} {
		for _, a := range order {
			want = append(want, a, a, a)
		}
	}
	require.GreaterOrEqual(t, len(got), len(want), "%q", got)
	require.Equal(t, want, got[len(got)-len(want):], "%q", got)
}

// TestInterleaveWrongData: a rank that corrupts its result shows in every algorithm's
// report, and every rank exits with the wrong-data status.
func TestInterleaveWrongData(t *testing.T) {
	testFault = true
	defer func() { testFault = false }()
	out, codes, _, _ := runInterleaved(t, 3, []string{"ring", "naive"}, "all_reduce", "-b", "64", "-e", "256", "-f", "2",
		"-n", "2", "-w", "0", "--interleave", "2", "-c", "1")
	require.Equal(t, []int{ExitWrongData, ExitWrongData, ExitWrongData}, codes, out)
	reps := reports(out)
	require.Len(t, reps, 2, out)
	for a, rep := range reps {
		rows := parseRows(t, rep)
		require.Len(t, rows, 3, a)
		for _, r := range rows {
			require.Equal(t, "1", r.wrongOOP, "%s: one wrong element, in the one checked block: %+v", a, r)
		}
		require.Contains(t, rep, "# Out of bounds values : 6 FAILED\n", a)
	}
}

func TestMedianBlock(t *testing.T) {
	h := func(us float64, wrong int64, checked bool) Half {
		return Half{TimeUs: us, AlgBW: 1 / us, BusBW: 2 / us, Wrong: wrong, Checked: checked}
	}
	m := medianBlock([]Half{h(5, 0, false), h(1, 1, true), h(9, 0, false), h(3, 2, false), h(7, 0, false)})
	require.Equal(t, Half{TimeUs: 5, AlgBW: 1.0 / 5, BusBW: 2.0 / 5, Wrong: 3, Checked: true}, m)
	// An even count takes the lower middle block, whole: its time and its bandwidths.
	m = medianBlock([]Half{h(4, 0, true), h(2, 0, true), h(8, 0, true), h(6, 0, true)})
	require.Equal(t, h(4, 0, true), m)
	require.Equal(t, h(3, 0, false), medianBlock([]Half{h(3, 0, false)}))
}
