package goccl

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/transport"
)

// The two-rank small AllReduce's fast path (fastpath.go): the same values as the serial
// reference for every dtype and op, the same books as the general path (Stats, the
// flight recorder), no finished call left "running" for the watchdog or a cancelled
// caller context to act on, ranks on either path understanding each other, and a
// deadline on the receive it arms after its send.

func shmPair(t *testing.T, opts ...Option) []*Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comms, err := InitLocal(ctx, 2, append([]Option{WithTransport("shm")}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	for _, c := range comms {
		require.NotNil(t, c.fast.try, "rank %d: the shm link offers no TrySend", c.rank)
	}
	return comms
}

func TestFastAllReduceValues(t *testing.T) {
	ctx := context.Background()
	comms := shmPair(t)
	mesh, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer mesh.Close()
	dts := []transport.DType{transport.Int8, transport.Uint8, transport.Int32, transport.Uint32, transport.Int64,
		transport.Uint64, transport.Float16, transport.BFloat16, transport.Float32, transport.Float64}
	ops := []transport.Op{transport.Sum, transport.Prod, transport.Min, transport.Max, transport.Avg}
	for _, dt := range dts {
		for _, op := range ops {
			// 0 bytes, one element, an odd count, the most shm's inline record carries,
			// one element more (a short record), an odd count of those, and the most the
			// fast path takes; each twice, the first call of a size resolving the choice.
			s := dt.Size()
			for _, count := range []int{0, 1, 3, 16 / s, 16/s + 1, 333/s | 1, algos.SmallExchangeMax / s} {
				for _, inPlace := range []bool{false, true} {
					before := comms[0].fast.calls
					for rep := range 2 {
						c := algostest.Case{Kind: transport.KindAllReduce, DType: dt, Op: op, Count: count, InPlace: inPlace,
							Seed: uint64(rep*1000 + count)}
						require.NoError(t, c.Check(ctx, mesh, viaCommsKind(comms)), "%s", c)
					}
					// The second call, if not the first, took the fast path.
					if count > 0 {
						require.Greater(t, comms[0].fast.calls, before, "%s %s, %d elements: the fast path was not taken", dt, op, count)
					}
				}
			}
		}
	}
}

// calls8 runs n 8-byte AllReduces (two float32 ones) on both ranks under ctxFor(rank),
// checking each sum.
func calls8(comms []*Comm, n int, ctxFor func(rank int) context.Context) []error {
	return runRanksInternal(comms, func(c *Comm) error {
		for i := range n {
			xs := []float32{float32(c.rank + i), float32(10 * c.rank)}
			if err := c.AllReduce(ctxFor(c.rank), HostSlice(xs), HostSlice(xs), 2, Float32, Sum); err != nil {
				return err
			}
			if want := []float32{float32(1 + 2*i), 10}; xs[0] != want[0] || xs[1] != want[1] {
				return fmt.Errorf("rank %d call %d: %v, want %v", c.rank, i, xs, want)
			}
		}
		return nil
	})
}

func runRanksInternal(comms []*Comm, fn func(c *Comm) error) []error {
	errs := make([]error, len(comms))
	done := make(chan struct{})
	for i, c := range comms {
		go func() {
			errs[i] = fn(c)
			done <- struct{}{}
		}()
	}
	for range comms {
		<-done
	}
	return errs
}

func background(int) context.Context { return context.Background() }

// Stats and the flight recorder read a fast call's end as the general path writes it:
// every call counted under its algorithm, the last record done, none running.
func TestFastAllReduceBooks(t *testing.T) {
	comms := shmPair(t)
	const n = 50
	wire := make([]LinkTotals, 2)
	for r, c := range comms {
		wire[r] = c.Stats().Transport["shm"]
	}
	for r, err := range calls8(comms, n, background) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, c := range comms {
		w := c.Stats().Transport["shm"]
		require.EqualValues(t, 8*n, w.Sent-wire[c.rank].Sent, "rank %d: bytes sent", c.rank)
		require.EqualValues(t, 8*n, w.Received-wire[c.rank].Received, "rank %d: bytes received", c.rank)
		require.Greater(t, c.fast.calls, uint64(n/2), "rank %d: the fast path was not taken", c.rank)
		s := c.Stats()
		require.EqualValues(t, n, s.Ops, "rank %d", c.rank)
		require.Zero(t, s.Errors)
		require.EqualValues(t, 8*n, s.Bytes)
		var calls uint64
		for _, a := range s.ByAlgo {
			calls += a.Calls
			require.Positive(t, a.Time, "rank %d: no time recorded", c.rank)
		}
		require.EqualValues(t, n, calls, "rank %d: %v", c.rank, s.ByAlgo)
		recs := c.FlightRecord()
		require.NotEmpty(t, recs)
		for _, r := range recs {
			require.Equal(t, OpDone, r.State, "rank %d op %d", c.rank, r.Seq)
			require.False(t, r.Finished.Before(r.Started), "rank %d op %d", c.rank, r.Seq)
		}
		require.EqualValues(t, n, recs[len(recs)-1].Seq)
	}
}

// A communicator idle for longer than its timeout after fast calls is not timed out,
// and a caller context cancelled after its calls returned does not fail it.
func TestFastAllReduceIdleAndCancelledAfter(t *testing.T) {
	const timeout = 100 * time.Millisecond
	comms := shmPair(t, WithTimeout(timeout))
	ctxs := make([]context.Context, 2)
	cancels := make([]context.CancelFunc, 2)
	for r := range ctxs {
		ctxs[r], cancels[r] = context.WithCancel(context.Background())
	}
	for r, err := range calls8(comms, 20, func(r int) context.Context { return ctxs[r] }) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, cancel := range cancels {
		cancel()
	}
	time.Sleep(4 * timeout) // the watchdog checks every sixteenth of it
	for _, c := range comms {
		require.NoError(t, c.Err(), "rank %d", c.rank)
		require.Greater(t, c.fast.calls, uint64(0), "rank %d: the fast path was not taken", c.rank)
	}
	// Rank 1 comes late, so rank 0 waits in its receive: an operation context
	// cancelled for a call that had already finished would fail that wait.
	late := func(r int) context.Context {
		if r == 1 {
			time.Sleep(30 * time.Millisecond)
		}
		return context.Background()
	}
	for r, err := range calls8(comms, 1, late) {
		require.NoError(t, err, "rank %d", r)
	}
}

// One rank on the fast path and the other on the general one: the same messages.
func TestFastAllReduceMeetsTheGeneralPath(t *testing.T) {
	comms := shmPair(t)
	comms[1].fast.try = nil
	for r, err := range calls8(comms, 40, background) {
		require.NoError(t, err, "rank %d", r)
	}
	require.Greater(t, comms[0].fast.calls, uint64(20))
	require.Zero(t, comms[1].fast.calls)
}

// A fast call whose peer never comes times out: its send went out before any deadline
// was armed, and the receive after it runs under one.
func TestFastAllReduceTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	comms := shmPair(t, WithTimeout(timeout))
	for r, err := range calls8(comms, 5, background) {
		require.NoError(t, err, "rank %d", r)
	}
	sent := comms[0].fast.sent
	start := time.Now()
	xs := []float32{1, 2}
	err := comms[0].AllReduce(context.Background(), HostSlice(xs), HostSlice(xs), 2, Float32, Sum)
	require.Error(t, err)
	require.True(t, errors.Is(err, transport.ErrTimeout), "%v", err)
	require.Less(t, time.Since(start), 10*timeout)
	require.Equal(t, sent+1, comms[0].fast.sent, "the call did not take the fast path")
	require.Error(t, comms[0].Err())
}

// The end's clock: no rate before the pairs span 5 ms, their ratio after, a fresh
// baseline every 10 s, the kernel clock again when the counter runs backwards, and
// never an end before its start.
func TestTSCClock(t *testing.T) {
	var k tscClock
	ms := int64(time.Millisecond)
	require.True(t, k.due(1000))
	k.pair(1000, 5000)
	require.Zero(t, k.perTick)
	require.False(t, k.due(1000+4*ms))
	k.pair(1000+4*ms, 5000+8*ms) // 2 ticks per ns, but only 4 ms on
	require.Zero(t, k.perTick)
	require.True(t, k.due(1000+20*ms))
	k.pair(1000+20*ms, 5000+40*ms)
	require.InDelta(t, 0.5, k.perTick, 1e-12)
	require.Equal(t, int64(1000+20*ms), k.ns0, "the calibrating pair is the next baseline")
	require.Equal(t, int64(700), k.since(200, 1000, 2000)) // 1000 ticks after a start at 200 ns
	require.Equal(t, int64(200), k.since(200, 1000, 900), "an end before its start")
	require.False(t, k.due(1000+5*int64(time.Second)))
	k.pair(1000+5*int64(time.Second), 0) // within 10 s: kept
	require.InDelta(t, 0.5, k.perTick, 1e-12)
	k.pair(1000+20*ms+10*int64(time.Second), 5000+40*ms+30*int64(time.Second)) // a new rate
	require.InDelta(t, 1.0/3, k.perTick, 1e-12)
	k.pair(1000+20*ms+20*int64(time.Second), 0) // the counter went back
	require.Zero(t, k.perTick)
}

// Stats' time for fast calls adds up to no more than the time they took, and to most of
// it: the counter's rate, once calibrated, converts ticks to nanoseconds.
func TestFastAllReduceTimes(t *testing.T) {
	comms := shmPair(t)
	begin := time.Now()
	deadline := begin.Add(150 * time.Millisecond) // past the 5 ms calibration
	errs := runRanksInternal(comms, func(c *Comm) error {
		xs := []float32{1, 2}
		for i := 0; ; i++ {
			if err := c.AllReduce(context.Background(), HostSlice(xs), HostSlice(xs), 2, Float32, Sum); err != nil {
				return err
			}
			// Both ranks stop at the same call: rank 0 decides, and says so in the sum
			// (of the same size, so that every call after the first takes the fast path).
			stop := float32(0)
			if c.rank == 0 && time.Now().After(deadline) {
				stop = 1
			}
			flag := []float32{stop, 0}
			if err := c.AllReduce(context.Background(), HostSlice(flag), HostSlice(flag), 2, Float32, Sum); err != nil {
				return err
			}
			if flag[0] != 0 {
				return nil
			}
		}
	})
	wall := time.Since(begin)
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	c := comms[0]
	s := c.Stats()
	var took time.Duration
	for _, a := range s.ByAlgo {
		took += a.Time
	}
	require.NotZero(t, c.fast.clock.perTick, "not calibrated after %d fast calls", c.fast.calls)
	recs := c.FlightRecord()
	first, last := recs[0], recs[len(recs)-1]
	// The recorded calls lie within their own first start and last end, back to back.
	var inRecs time.Duration
	for _, r := range recs {
		require.False(t, r.Finished.Before(r.Started), "op %d", r.Seq)
		inRecs += r.Finished.Sub(r.Started)
	}
	require.LessOrEqual(t, inRecs, last.Finished.Sub(first.Started))
	// The calls ran back to back: their times are most of the loop's, never more.
	require.LessOrEqual(t, took, wall)
	require.Greater(t, took, wall/10, "%d calls", s.Ops)
}

// shmLocal is world ranks of this process over shm.
func shmLocal(t *testing.T, world int, opts ...Option) []*Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comms, err := InitLocal(ctx, world, append([]Option{WithTransport("shm")}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// checkFast fails unless the fast point-to-point path ran (or did not, as want says)
// for call, which it runs.
func checkFast(c *Comm, want bool, what string, call func() error) error {
	before := c.fast.p2p
	if err := call(); err != nil {
		return fmt.Errorf("rank %d, %s: %w", c.rank, what, err)
	}
	if got := c.fast.p2p != before; got != want {
		return fmt.Errorf("rank %d, %s: took the fast path %v, want %v", c.rank, what, got, want)
	}
	return nil
}

// The point-to-point fast path (fastP2P), at 2 and 3 ranks: a SendRecv (a ring shift,
// in place and into another buffer), a Send and a Recv take it when the link takes the
// message at once (over shm up to 2 KiB), and deliver every element; larger messages
// take the general path and deliver too.
func TestFastP2PValues(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			comms := shmLocal(t, world)
			// int32 elements: 0, 1, 7, odd near 1 KiB and 2 KiB in all (fast); 4 KiB and
			// one element, and 128 KiB and three (the general path).
			sizes := []struct {
				n    int
				fast bool
			}{{0, true}, {1, true}, {7, true}, {255, true}, {512, true}, {1025, false}, {1<<15 + 3, false}}
			errs := runRanksInternal(comms, func(c *Comm) error {
				ctx := context.Background()
				r := c.rank
				next, prev := (r+1)%world, (r+world-1)%world
				val := func(rank, call, i int) int32 { return int32(rank*1000003 + call*7919 + i) }
				for _, sz := range sizes {
					n := sz.n
					for call := range 3 {
						for _, inPlace := range []bool{true, false} {
							buf := make([]int32, n)
							for i := range buf {
								buf[i] = val(r, call, i)
							}
							out := buf
							if !inPlace {
								out = make([]int32, n)
							}
							// The first call of a link may find its peer not yet attached.
							what := fmt.Sprintf("SendRecv of %d int32, call %d, in place %v", n, call, inPlace)
							if err := checkFast(c, sz.fast || call == 0, what, func() error {
								return c.SendRecv(ctx, HostSlice(buf), next, HostSlice(out), prev, n, Int32)
							}); err != nil && (call > 0 || sz.fast) {
								return err
							}
							for i, x := range out {
								if want := val(prev, call, i); x != want {
									return fmt.Errorf("rank %d, %s: [%d] = %d, want %d", r, what, i, x, want)
								}
							}
						}
					}
					// Send and Recv alone, even ranks first, so that nobody waits on itself.
					one := make([]int32, n)
					for i := range one {
						one[i] = val(r, 5, i)
					}
					got := make([]int32, n)
					for turn := range 2 {
						if (r%2 == 0) == (turn == 0) {
							if err := checkFast(c, sz.fast, fmt.Sprintf("Send of %d int32", n), func() error {
								return c.Send(ctx, HostSlice(one), n, Int32, next)
							}); err != nil {
								return err
							}
						} else if err := checkFast(c, true, fmt.Sprintf("Recv of %d int32", n), func() error {
							return c.Recv(ctx, HostSlice(got), n, Int32, prev)
						}); err != nil {
							return err
						}
					}
					for i, x := range got {
						if want := val(prev, 5, i); x != want {
							return fmt.Errorf("rank %d: Recv of %d int32: [%d] = %d, want %d", r, n, i, x, want)
						}
					}
				}
				return nil
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
		})
	}
}

// pingPong8 runs n ping-pongs of 8 bytes between the two ranks (rank 0 sends first),
// then n SendRecvs of 12 bytes, under ctxFor(rank), checking every value.
func pingPong8(comms []*Comm, n int, ctxFor func(rank int) context.Context) []error {
	return runRanksInternal(comms, func(c *Comm) error {
		ctx := ctxFor(c.rank)
		peer := 1 - c.rank
		for i := range n {
			out, in := []int32{int32(c.rank), int32(i)}, make([]int32, 2)
			for turn := range 2 {
				var err error
				if (turn == 0) == (c.rank == 0) {
					err = c.Send(ctx, HostSlice(out), 2, Int32, peer)
				} else {
					err = c.Recv(ctx, HostSlice(in), 2, Int32, peer)
				}
				if err != nil {
					return err
				}
			}
			if in[0] != int32(peer) || in[1] != int32(i) {
				return fmt.Errorf("rank %d, ping-pong %d: got %v from rank %d", c.rank, i, in, peer)
			}
		}
		for i := range n {
			out, in := []int32{int32(c.rank), int32(i), 7}, make([]int32, 3)
			if err := c.SendRecv(ctx, HostSlice(out), peer, HostSlice(in), peer, 3, Int32); err != nil {
				return err
			}
			if in[0] != int32(peer) || in[1] != int32(i) || in[2] != 7 {
				return fmt.Errorf("rank %d, SendRecv %d: got %v from rank %d", c.rank, i, in, peer)
			}
		}
		return nil
	})
}

// Stats, the links' byte counts and the flight recorder read fast point-to-point calls
// as the general path writes them: every call counted under "p2p" with its bytes, the
// records done, none running.
func TestFastP2PBooks(t *testing.T) {
	comms := shmLocal(t, 2)
	const n = 50
	wire := make([]LinkTotals, 2)
	for r, c := range comms {
		wire[r] = c.Stats().Transport["shm"] // Init's own messages
	}
	for r, err := range pingPong8(comms, n, background) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, c := range comms {
		require.Greater(t, c.fast.p2p, uint64(2*n), "rank %d: the fast path was not taken", c.rank)
		s := c.Stats()
		require.EqualValues(t, 3*n, s.Ops, "rank %d", c.rank)
		require.Zero(t, s.Errors)
		p := s.ByAlgo["p2p"]
		require.EqualValues(t, 3*n, p.Calls, "rank %d: %v", c.rank, s.ByAlgo)
		require.EqualValues(t, 8*2*n+12*n, p.Bytes, "rank %d", c.rank)
		require.Positive(t, p.Time, "rank %d: no time recorded", c.rank)
		w := s.Transport["shm"]
		require.EqualValues(t, 8*n+12*n, w.Sent-wire[c.rank].Sent, "rank %d: bytes sent", c.rank)
		require.EqualValues(t, 8*n+12*n, w.Received-wire[c.rank].Received, "rank %d: bytes received", c.rank)
		recs := c.FlightRecord()
		require.NotEmpty(t, recs)
		for _, r := range recs {
			require.Equal(t, OpDone, r.State, "rank %d op %s", c.rank, r.Op)
			require.Equal(t, "p2p", r.Algo)
			require.False(t, r.Finished.Before(r.Started), "rank %d op %s", c.rank, r.Op)
		}
		require.Equal(t, fmt.Sprintf("sendrecv int32 count=3 to %d from %d", 1-c.rank, 1-c.rank), recs[len(recs)-1].Op)
	}
}

// A communicator idle for longer than its timeout after fast point-to-point calls is not
// timed out, a caller context cancelled after they returned does not fail it, and one
// rank on the general path meets the other on the fast one.
func TestFastP2PIdleCancelledAndMixed(t *testing.T) {
	const timeout = 100 * time.Millisecond
	comms := shmLocal(t, 2, WithTimeout(timeout))
	ctxs := make([]context.Context, 2)
	cancels := make([]context.CancelFunc, 2)
	for r := range ctxs {
		ctxs[r], cancels[r] = context.WithCancel(context.Background())
	}
	for r, err := range pingPong8(comms, 20, func(r int) context.Context { return ctxs[r] }) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, cancel := range cancels {
		cancel()
	}
	time.Sleep(4 * timeout) // the watchdog checks every sixteenth of it
	for _, c := range comms {
		require.NoError(t, c.Err(), "rank %d", c.rank)
		require.Greater(t, c.fast.p2p, uint64(20), "rank %d: the fast path was not taken", c.rank)
	}
	// Rank 1 sends on the general path (its link offers no TrySend now); its receives,
	// which need none, stay fast.
	comms[1].obsLink(0).try = nil
	before := []uint64{comms[0].fast.p2p, comms[1].fast.p2p}
	for r, err := range pingPong8(comms, 20, background) {
		require.NoError(t, err, "rank %d", r)
	}
	require.EqualValues(t, 60, comms[0].fast.p2p-before[0])
	require.EqualValues(t, 20, comms[1].fast.p2p-before[1])
}

// A fast Recv whose peer never sends times out under the communicator's timeout, and
// fails the communicator, as the general path's does.
func TestFastP2PTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	comms := shmLocal(t, 2, WithTimeout(timeout))
	for r, err := range pingPong8(comms, 3, background) {
		require.NoError(t, err, "rank %d", r)
	}
	before := comms[0].fast.p2p
	start := time.Now()
	got := make([]int32, 2)
	err := comms[0].Recv(context.Background(), HostSlice(got), 2, Int32, 1)
	require.Error(t, err)
	require.True(t, errors.Is(err, transport.ErrTimeout), "%v", err)
	require.Contains(t, err.Error(), "recv from rank 1")
	require.Less(t, time.Since(start), 10*timeout)
	require.Equal(t, before+1, comms[0].fast.p2p, "the call did not take the fast path")
	require.Error(t, comms[0].Err())
	recs := comms[0].FlightRecord()
	require.Equal(t, OpFailed, recs[len(recs)-1].State)
}

// barriers runs n Barriers on both ranks, rank late%2 entering each i-th with i%7 == 0
// a millisecond late; a rank that leaves before the other entered is an error.
func barriers(comms []*Comm, n int) []error {
	var entered [2]atomic.Int64
	return runRanksInternal(comms, func(c *Comm) error {
		for i := range n {
			if i%7 == 0 && c.rank == (i/7)%2 {
				time.Sleep(time.Millisecond)
			}
			entered[c.rank].Add(1)
			if err := c.Barrier(context.Background()); err != nil {
				return err
			}
			if got := entered[1-c.rank].Load(); got < int64(i+1) {
				return fmt.Errorf("rank %d left barrier %d when rank %d had entered %d", c.rank, i, 1-c.rank, got)
			}
		}
		return nil
	})
}

// The two-rank Barrier's fast path (fastBarrier): no rank leaves before the other
// entered, the books are the general path's (Stats under rd, the flight records done),
// a rank on the general path meets one on the fast path, and a Barrier whose peer never
// comes times out.
func TestFastBarrier(t *testing.T) {
	const timeout = 300 * time.Millisecond
	comms := shmPair(t, WithTimeout(timeout))
	const n = 100
	for r, err := range barriers(comms, n) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, c := range comms {
		require.Greater(t, c.fast.barriers, uint64(n/2), "rank %d: the fast path was not taken", c.rank)
		s := c.Stats()
		require.EqualValues(t, n, s.Ops, "rank %d", c.rank)
		require.EqualValues(t, n, s.ByAlgo["rd"].Calls, "rank %d: %v", c.rank, s.ByAlgo)
		for _, r := range c.FlightRecord() {
			require.Equal(t, OpDone, r.State, "rank %d op %d", c.rank, r.Seq)
			require.Equal(t, "rd", r.Algo)
		}
	}
	comms[1].fast.try = nil // the general path: rd's own Barrier, the same message
	before := []uint64{comms[0].fast.barriers, comms[1].fast.barriers}
	for r, err := range barriers(comms, 30) {
		require.NoError(t, err, "rank %d", r)
	}
	require.EqualValues(t, 30, comms[0].fast.barriers-before[0])
	require.EqualValues(t, 0, comms[1].fast.barriers-before[1])

	start := time.Now()
	err := comms[0].Barrier(context.Background())
	require.Error(t, err)
	require.True(t, errors.Is(err, transport.ErrTimeout), "%v", err)
	require.Less(t, time.Since(start), 10*timeout)
	require.EqualValues(t, 31, comms[0].fast.barriers-before[0], "the call did not take the fast path")
	require.Error(t, comms[0].Err())
}

// The clock of calls under execMu reads the kernel's time to within the anchor's error
// (under 0.2 us, allowed 1 us here), never goes back, and, where the counter is usable,
// converts ticks from an anchor once calibrated.
func TestTSCClockNow(t *testing.T) {
	var k tscClock
	slack := int64(time.Microsecond)
	var prev int64
	stop := monoNow() + int64(40*time.Millisecond) // past the 5 ms calibration
	reads := 0
	for monoNow() < stop {
		a := monoNow()
		ns, tick := k.now()
		b := monoNow()
		require.GreaterOrEqual(t, ns, prev, "read %d went back", reads)
		require.GreaterOrEqual(t, ns, a-slack, "read %d", reads)
		require.LessOrEqual(t, ns, b+slack, "read %d", reads)
		if tscUsable() {
			require.NotZero(t, tick)
			end := k.end(ns, tick, rdtsc())
			require.GreaterOrEqual(t, end, ns)
			require.LessOrEqual(t, end, monoNow()+slack)
		}
		prev, reads = ns, reads+1
	}
	if tscUsable() {
		require.NotZero(t, k.perTick, "not calibrated after %d reads", reads)
		require.NotZero(t, k.anchorTicks)
	}
}

// Queued Works take the fast path too (execute): issued several at a time and then
// waited for, AllReduces of 1 to 4099 float32 (in place and not; the largest on the
// general path between fast Barriers), a SendRecv ring shift and a Barrier give the serial reference's values, in issue order, with the books of
// blocking calls: every call in Stats under its algorithm, every flight record done
// and named, each link's bytes. A queued call whose peer never comes fails on Wait
// with a timeout, and the communicator with it.
func TestFastAsyncWork(t *testing.T) {
	const timeout = 300 * time.Millisecond
	comms := shmPair(t, WithTimeout(timeout))
	ctx := context.Background()
	const depth = 6 // Works in flight per round
	sizes := []int{1, 3, 255, 4099}
	type before struct{ calls, p2p, barriers, ops uint64 }
	was := make([]before, 2)
	for r, c := range comms {
		was[r] = before{c.fast.calls, c.fast.p2p, c.fast.barriers, c.Stats().Ops}
	}
	errs := runRanksInternal(comms, func(c *Comm) error {
		for _, n := range sizes {
			for _, inPlace := range []bool{false, true} {
				sends := make([][]float32, depth)
				recvs := make([][]float32, depth)
				ws := make([]*Work, 0, 3*depth)
				for i := range depth {
					sends[i] = make([]float32, n)
					for j := range sends[i] {
						sends[i][j] = float32(c.rank*1000 + i*10 + j%7)
					}
					recvs[i] = sends[i]
					if !inPlace {
						recvs[i] = make([]float32, n)
					}
					ws = append(ws, c.AllReduceAsync(ctx, HostSlice(sends[i]), HostSlice(recvs[i]), n, Float32, Sum))
				}
				// A ring shift and a barrier among them.
				shift := make([]float32, n)
				got := make([]float32, n)
				for j := range shift {
					shift[j] = float32(c.rank*100 + j)
				}
				ws = append(ws, c.SendRecvAsync(ctx, HostSlice(shift), 1-c.rank, HostSlice(got), 1-c.rank, n, Float32))
				ws = append(ws, c.BarrierAsync(ctx))
				for k, w := range ws {
					if err := w.Wait(ctx); err != nil {
						return fmt.Errorf("n=%d in place %v: work %d: %w", n, inPlace, k, err)
					}
				}
				for i := range depth {
					for j := range n {
						// The serial sum over the two ranks, in float64.
						want := float64(0*1000+i*10+j%7) + float64(1*1000+i*10+j%7)
						if float64(recvs[i][j]) != want {
							return fmt.Errorf("n=%d in place %v: AllReduce %d element %d: got %v, want %v", n, inPlace, i, j, recvs[i][j], want)
						}
					}
				}
				for j := range n {
					if want := float32((1-c.rank)*100 + j); got[j] != want {
						return fmt.Errorf("n=%d: SendRecv element %d: got %v, want %v", n, j, got[j], want)
					}
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	rounds := uint64(2 * len(sizes))
	for r, c := range comms {
		s := c.Stats()
		require.EqualValues(t, rounds*(depth+2), s.Ops-was[r].ops, "rank %d: %v", r, s.ByAlgo)
		// Up to 255 elements, every AllReduce after a size's first and every SendRecv;
		// every Barrier after the first.
		fast := 2*3*(depth+1) - 3 + (rounds - 1)
		require.GreaterOrEqual(t, c.fast.calls-was[r].calls, uint64(fast), "rank %d: the fast path was not taken", r)
		require.EqualValues(t, 2*3, c.fast.p2p-was[r].p2p, "rank %d", r)
		require.GreaterOrEqual(t, c.fast.barriers-was[r].barriers, rounds-1, "rank %d", r)
		for _, rec := range c.FlightRecord() {
			require.Equal(t, OpDone, rec.State, "rank %d op %d", r, rec.Seq)
			require.NotEmpty(t, rec.Algo, "rank %d op %d", r, rec.Seq)
			require.False(t, rec.Finished.Before(rec.Started), "rank %d op %d", r, rec.Seq)
		}
		require.EqualValues(t, s.Ops, c.FlightRecord()[len(c.FlightRecord())-1].Seq)
	}

	// Rank 1 never comes: the queued call fails on Wait, by the deadline. (One call of
	// its size first, so that the size's choice is made.)
	for r, err := range calls8(comms, 1, background) {
		require.NoError(t, err, "rank %d", r)
	}
	calls := comms[0].fast.calls
	sent := comms[0].fast.sent
	xs := []float32{1, 2}
	start := time.Now()
	err := comms[0].AllReduceAsync(ctx, HostSlice(xs), HostSlice(xs), 2, Float32, Sum).Wait(ctx)
	require.Error(t, err)
	require.True(t, errors.Is(err, transport.ErrTimeout), "%v", err)
	require.Less(t, time.Since(start), 10*timeout)
	require.Equal(t, sent+1, comms[0].fast.sent, "the call did not take the fast path")
	require.Equal(t, calls, comms[0].fast.calls)
	require.Error(t, comms[0].Err())
}
