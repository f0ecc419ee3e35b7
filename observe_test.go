package goccl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/internal/trace"
)

func TestInitLogNamesEachPeersTransport(t *testing.T) {
	dir := t.TempDir()
	comms := local(t, 3, goccl.WithDebug("INFO", "INIT"), goccl.WithDebugFile(filepath.Join(dir, "log.%p")))
	for _, c := range comms {
		c.Close()
	}
	logs := readAll(t, dir)
	for r := range 3 {
		for p := range 3 {
			if p != r {
				require.Regexp(t, fmt.Sprintf(`msg=channel .*rank=%d subsys=INIT peer=%d peer_host=\S+ transport=inmem`, r, p), logs)
			}
		}
	}
	require.Contains(t, logs, "transport=inmem")
	require.Contains(t, logs, "goccl init done")
	require.NotContains(t, logs, "subsys=COLL", "the INIT filter must drop other subsystems")
}

func TestLogLevelAndExclusion(t *testing.T) {
	dir := t.TempDir()
	comms := local(t, 2, goccl.WithDebug("INFO", "^INIT"), goccl.WithDebugFile(filepath.Join(dir, "log.%p")))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		return goccl.AllReduceSlice(context.Background(), c, []float32{1}, goccl.Sum)
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, c := range comms {
		c.Close()
	}
	logs := readAll(t, dir)
	require.NotContains(t, logs, "msg=channel", "^INIT must exclude INIT lines")
	require.NotContains(t, logs, "msg=collective", "per-collective lines need TRACE")

	dir2 := t.TempDir()
	comms = local(t, 2, goccl.WithDebug("TRACE", "COLL"), goccl.WithDebugFile(filepath.Join(dir2, "log.%p")))
	errs = runRanks(comms, func(c *goccl.Comm) error {
		return goccl.AllReduceSlice(context.Background(), c, []float32{1}, goccl.Sum)
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, c := range comms {
		c.Close()
	}
	require.Contains(t, readAll(t, dir2), "msg=collective")
}

func readAll(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var b strings.Builder
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		b.Write(data)
	}
	return b.String()
}

func TestTraceFilesNestAndMerge(t *testing.T) {
	dir := t.TempDir()
	const world = 3
	comms := local(t, world, goccl.WithTrace(dir), goccl.WithAlgo("ring"))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		xs := make([]float32, 10000)
		for i := 0; i < 3; i++ {
			if err := goccl.AllReduceSlice(context.Background(), c, xs, goccl.Sum); err != nil {
				return err
			}
		}
		end := c.TraceSpan("dp", "bucket 0", nil)
		end()
		return c.Barrier(context.Background())
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, c := range comms {
		require.NoError(t, c.Close())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "goccl-trace.*.json"))
	require.Len(t, files, world)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var tf trace.File
		require.NoError(t, json.Unmarshal(b, &tf), f)
		checkNesting(t, tf.TraceEvents)
		colls := 0
		for _, e := range tf.TraceEvents {
			if e.Ph == "X" && e.Cat == "coll" {
				colls++
				if strings.HasPrefix(e.Name, "allreduce") {
					require.Equal(t, "ring", e.Args["algo"])
				}
			}
		}
		require.Equal(t, 4, colls, "3 allreduces and a barrier in %s", f)
	}
	merged, paths, err := trace.Merge(dir)
	require.NoError(t, err)
	require.Len(t, paths, world)
	pids := map[int]bool{}
	for _, e := range merged.TraceEvents {
		pids[e.Pid] = true
	}
	require.Len(t, pids, world, "one track per rank")
}

// checkNesting asserts that, on every track, spans either nest or do not overlap, and
// that every link span lies inside a collective span of the same rank.
func checkNesting(t *testing.T, evs []trace.Event) {
	t.Helper()
	byTid := map[int][]trace.Event{}
	var colls []trace.Event
	for _, e := range evs {
		if e.Ph != "X" {
			continue
		}
		byTid[e.Tid] = append(byTid[e.Tid], e)
		if e.Cat == "coll" {
			colls = append(colls, e)
		}
	}
	const slack = 1.0 // us: clock reads at span edges
	for tid, spans := range byTid {
		sort.Slice(spans, func(i, j int) bool { return spans[i].Ts < spans[j].Ts })
		for i := 1; i < len(spans); i++ {
			prev, cur := spans[i-1], spans[i]
			overlap := cur.Ts < prev.Ts+prev.Dur-slack
			nested := cur.Ts+cur.Dur <= prev.Ts+prev.Dur+slack
			require.True(t, !overlap || nested, "track %d: %s at %.1f overlaps %s", tid, cur.Name, cur.Ts, prev.Name)
		}
		if tid < 1000 {
			continue
		}
		for _, s := range spans {
			inside := false
			for _, c := range colls {
				if s.Ts >= c.Ts-slack && s.Ts+s.Dur <= c.Ts+c.Dur+slack {
					inside = true
				}
			}
			require.True(t, inside, "link span %s at %.1f is outside every collective", s.Name, s.Ts)
		}
	}
}

func TestStuckRankShowsInEveryDump(t *testing.T) {
	const world = 3
	comms := local(t, world, goccl.WithAlgo("ring"))
	ctx := context.Background()
	// Everyone does one collective, then rank 2 stops calling.
	errs := runRanks(comms, func(c *goccl.Comm) error { return c.Barrier(ctx) })
	for _, err := range errs {
		require.NoError(t, err)
	}
	works := make([]*goccl.Work, 2)
	for r := range 2 {
		xs := make([]float32, 1<<10)
		works[r] = comms[r].AllReduceAsync(ctx, goccl.HostSlice(xs), goccl.HostSlice(xs), len(xs), goccl.Float32, goccl.Sum)
	}
	// Whatever the checks below say, end the two blocked operations before the
	// communicators close (Close waits for them, up to their 10-minute deadline).
	t.Cleanup(func() {
		for r := range 2 {
			comms[r].Abort(fmt.Errorf("test over"))
		}
	})
	// Wait until both have published their progress and are blocked, rank 0 on its
	// receive from rank 2 (under -race a dump can name the laggard before it is there).
	deadline := time.Now().Add(10 * time.Second)
	var dumps [2]string
	for time.Now().Before(deadline) {
		ok := true
		for r := range 2 {
			dumps[r] = comms[r].DumpFlightRecord()
			ok = ok && strings.Contains(dumps[r], "behind: rank 2")
		}
		ok = ok && strings.Contains(dumps[0], "waiting on rank 2 (recv")
		if ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for r := range 2 {
		require.Contains(t, dumps[r], "running", "rank %d dump:\n%s", r, dumps[r])
		require.Contains(t, dumps[r], "behind: rank 2", "rank %d dump:\n%s", r, dumps[r])
		require.Contains(t, dumps[r], "never called #2", "rank %d dump:\n%s", r, dumps[r])
	}
	// Rank 0 (whose ring predecessor is rank 2) is blocked on it directly.
	require.Contains(t, dumps[0], "waiting on rank 2 (recv", dumps[0])
	for r := range 2 {
		comms[r].Abort(fmt.Errorf("test over"))
		require.Error(t, works[r].Wait(ctx))
	}
}

func TestStatsCount(t *testing.T) {
	comms := local(t, 2, goccl.WithAlgo("tree"))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		xs := make([]float64, 100)
		for i := 0; i < 5; i++ {
			if err := goccl.AllReduceSlice(context.Background(), c, xs, goccl.Sum); err != nil {
				return err
			}
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	s := comms[0].Stats()
	require.Equal(t, uint64(5), s.Ops)
	require.Equal(t, uint64(5), s.ByAlgo["tree"].Calls)
	require.Equal(t, uint64(5*800), s.ByAlgo["tree"].Bytes)
	require.Equal(t, 1, s.Transport["inmem"].Links)
	require.NotZero(t, s.Transport["inmem"].Sent)
}

// The flight recorder keeps a finished operation's times and outcome, for a blocking
// call (recorded as issued and started at once) and an asynchronous one alike, and a
// blocking call on a broken communicator is recorded as failed, not left running.
func TestFlightRecordOfFinishedOperations(t *testing.T) {
	comms := local(t, 2, goccl.WithAlgo("ring"))
	ctx := context.Background()
	errs := runRanks(comms, func(c *goccl.Comm) error {
		xs := []float32{1, 2, 3}
		b := goccl.HostSlice(xs)
		if err := c.AllReduce(ctx, b, b, len(xs), goccl.Float32, goccl.Sum); err != nil {
			return err
		}
		return c.AllReduceAsync(ctx, b, b, len(xs), goccl.Float32, goccl.Max).Wait(ctx)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	recs := comms[0].FlightRecord()
	require.Len(t, recs, 2)
	for i, r := range recs {
		require.Equal(t, goccl.OpDone, r.State, "record %d: %+v", i, r)
		require.Equal(t, "ring", r.Algo, "record %d", i)
		require.False(t, r.Queued.IsZero() || r.Started.IsZero() || r.Finished.IsZero(), "record %d: %+v", i, r)
		require.False(t, r.Started.Before(r.Queued) || r.Finished.Before(r.Started), "record %d: %+v", i, r)
	}
	require.Contains(t, recs[0].Op, "sum")
	require.Contains(t, recs[1].Op, "max")

	// Rank 1 stops calling: rank 0's first operation blocks, the second waits in the
	// queue; after Abort both are recorded as failed, none as running or queued.
	xs := []float32{1}
	b := goccl.HostSlice(xs)
	first := comms[0].AllReduceAsync(ctx, b, b, 1, goccl.Float32, goccl.Sum)
	second := comms[0].AllReduceAsync(ctx, b, b, 1, goccl.Float32, goccl.Sum)
	time.Sleep(50 * time.Millisecond)
	comms[0].Abort(fmt.Errorf("test over"))
	require.Error(t, first.Wait(ctx))
	require.Error(t, second.Wait(ctx))
	recs = comms[0].FlightRecord()
	require.Len(t, recs, 4)
	for _, r := range recs[2:] {
		require.Equal(t, goccl.OpFailed, r.State, "%+v", r)
		require.NotEmpty(t, r.Err, "%+v", r)
	}
}

// SendRecv, blocking and asynchronous, and Send and Recv alone, are recorded like
// collectives: the flight record names the dtype, count and both peers (-1 for a half
// that is skipped), the algorithm "p2p" and the state; Stats counts their calls and
// bytes.
func TestFlightRecordOfPointToPoint(t *testing.T) {
	comms := local(t, 2)
	ctx := context.Background()
	errs := runRanks(comms, func(c *goccl.Comm) error {
		peer := 1 - c.Rank()
		out, in := []int32{1, 2, 3}, make([]int32, 3)
		if err := c.SendRecv(ctx, goccl.HostSlice(out), peer, goccl.HostSlice(in), peer, 3, goccl.Int32); err != nil {
			return err
		}
		if err := c.SendRecvAsync(ctx, goccl.HostSlice(out), peer, goccl.HostSlice(in), peer, 3, goccl.Int32).Wait(ctx); err != nil {
			return err
		}
		if c.Rank() == 0 {
			return c.Send(ctx, goccl.HostSlice(out[:2]), 2, goccl.Int32, peer)
		}
		return c.Recv(ctx, goccl.HostSlice(in[:2]), 2, goccl.Int32, peer)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for r, c := range comms {
		recs := c.FlightRecord()
		require.Len(t, recs, 3, "rank %d", r)
		last := "sendrecv int32 count=2 to 1 from -1"
		if r == 1 {
			last = "sendrecv int32 count=2 to -1 from 0"
		}
		peer := 1 - r
		for i, want := range []string{fmt.Sprintf("sendrecv int32 count=3 to %d from %d", peer, peer), "", last} {
			if want == "" {
				want = recs[0].Op
			}
			require.Equal(t, want, recs[i].Op, "rank %d, record %d", r, i)
			require.Equal(t, goccl.OpDone, recs[i].State, "rank %d, record %d", r, i)
			require.Equal(t, "p2p", recs[i].Algo, "rank %d, record %d", r, i)
		}
		st := c.Stats().ByAlgo["p2p"]
		require.Equal(t, uint64(3), st.Calls, "rank %d", r)
		require.Equal(t, uint64(12+12+8), st.Bytes, "rank %d", r)
	}
}

// An AllReduce whose output reaches algos.ColdBytes receives its last step with
// RecvCold (shm's non-temporal copy, through the observer) and, where the ring runs its
// steps in order (over tcp, and at 3 ranks), reduces its last reduce-scatter step with
// RecvReduceCold (non-temporal stores, pieces streamed off the link): values against
// the exact sum, and the links' byte counts as the ring moves them (every segment
// crosses W-1 links in each half, so all ranks together send and receive 2(W-1) times
// the message), out of place and in place.
func TestColdAllReduceValuesAndCounts(t *testing.T) {
	for _, tc := range []struct {
		transport string
		world     int
	}{{"shm", 2}, {"tcp", 2}, {"shm", 3}} {
		t.Run(fmt.Sprintf("%s-%d", tc.transport, tc.world), func(t *testing.T) {
			coldAllReduce(t, tc.transport, tc.world)
		})
	}
}

func coldAllReduce(t *testing.T, transport string, world int) {
	comms := local(t, world, goccl.WithTransport(transport), goccl.WithAlgo("ring"))
	const n = algos.ColdBytes/4 + 3 // 12 bytes over the size, in float32: segments of odd and even counts
	in := func(r, i int) float32 { return float32((i*7+r*11)%1000 - 500) }
	before := make([]goccl.LinkTotals, world)
	for r, c := range comms {
		before[r] = c.Stats().Transport[transport]
	}
	outs := make([][]float32, world)
	errs := runRanks(comms, func(c *goccl.Comm) error {
		r := c.Rank()
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = in(r, i)
		}
		out := make([]float32, n)
		if err := c.AllReduce(context.Background(), goccl.HostSlice(xs), goccl.HostSlice(out), n, goccl.Float32, goccl.Sum); err != nil {
			return err
		}
		if err := goccl.AllReduceSlice(context.Background(), c, xs, goccl.Sum); err != nil {
			return err
		}
		for i := range xs {
			if xs[i] != out[i] {
				return fmt.Errorf("rank %d [%d]: in place %v, out of place %v", r, i, xs[i], out[i])
			}
		}
		outs[r] = out
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	var sent, received uint64
	for r, out := range outs {
		for i, x := range out {
			want := 0.0
			for q := range world {
				want += float64(in(q, i))
			}
			if float64(x) != want {
				t.Fatalf("rank %d [%d]: %v, want %v", r, i, x, want)
			}
		}
		w := comms[r].Stats().Transport[transport]
		sent += w.Sent - before[r].Sent
		received += w.Received - before[r].Received
	}
	calls := uint64(2) // out of place, in place
	require.EqualValues(t, calls*uint64(2*(world-1))*4*n, sent, "bytes sent by all ranks")
	require.EqualValues(t, calls*uint64(2*(world-1))*4*n, received, "bytes received by all ranks")
}

// The ring's ReduceScatter whose output reaches algos.ColdBytes reduces its last step
// past the caches (RecvReduceCold, streamed off the link), and its AllGather of such
// an output receives its last block cold (shm's non-temporal copy): over shm and tcp
// at 2 ranks, blocks of ColdBytes + 12 bytes, sum and avg, in place and out of place,
// every element against a float64 reference (gatherScatter).
func TestColdGatherScatter(t *testing.T) {
	for _, transport := range []string{"shm", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			comms := local(t, 2, goccl.WithTransport(transport), goccl.WithAlgo("ring"))
			gatherScatter(t, comms, algos.ColdBytes/4+3)
		})
	}
}
