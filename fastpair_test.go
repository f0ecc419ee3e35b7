package goccl

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/transport"
)

// The two-rank fast paths of the other collectives (fastPair: AllGather, ReduceScatter,
// AllToAll; fastOneWay: Broadcast, Scatter, Gather, Reduce): the values of every dtype
// (and op, for the reductions; and root, for the rooted ones) against algostest's
// serial reference, in place and not, at 0, 1, 3 and odd counts, at the largest block
// the shm link takes at once (2 KiB) and one element past it; the fast path taken for
// every non-empty block up to 2 KiB and not beyond (a rank that only receives takes it
// beyond too); ranks on either path understanding each other; and the books (Stats,
// the link's bytes, the flight record) as the general path keeps them.

// viaCommsKind runs an algostest case through the communicators' blocking collective
// of its kind (commIssue; the mesh only numbers the ranks).
func viaCommsKind(comms []*Comm) func(context.Context, algos.Peers, *algos.Args) error {
	issue := commIssue(comms, false)
	return func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		_, err := issue(ctx, p, a)
		return err
	}
}

var pairKinds = []transport.Kind{transport.KindAllGather, transport.KindReduceScatter, transport.KindAllToAll, transport.KindBroadcast,
	transport.KindScatter, transport.KindGather, transport.KindReduce}

// oneWay reports whether kind is one message between the two ranks, and whether rank r
// sends it (the root of a Broadcast or Scatter, the other rank of a Gather or Reduce).
func oneWay(kind transport.Kind, r, root int) (one, sends bool) {
	switch kind {
	case transport.KindBroadcast, transport.KindScatter:
		return true, r == root
	case transport.KindGather, transport.KindReduce:
		return true, r != root
	}
	return false, true
}

func TestFastPairValues(t *testing.T) {
	ctx := context.Background()
	comms := shmPair(t)
	mesh, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer mesh.Close()
	dts := []transport.DType{transport.Int8, transport.Uint8, transport.Int32, transport.Uint32, transport.Int64,
		transport.Uint64, transport.Float16, transport.BFloat16, transport.Float32, transport.Float64}
	for _, kind := range pairKinds {
		ops, roots := []transport.Op{transport.Sum}, []int{0}
		if kind == transport.KindReduceScatter || kind == transport.KindReduce {
			ops = []transport.Op{transport.Sum, transport.Prod, transport.Min, transport.Max, transport.Avg}
		}
		if one, _ := oneWay(kind, 0, 0); one {
			roots = []int{0, 1}
		}
		for _, dt := range dts {
			for _, op := range ops {
				for _, root := range roots {
					s := dt.Size()
					for _, count := range []int{0, 1, 3, 333/s | 1, 2048 / s, 2048/s + 1} {
						for _, inPlace := range []bool{false, true} {
							before := [2]uint64{comms[0].fast.pairs, comms[1].fast.pairs}
							for rep := range 2 {
								c := algostest.Case{Kind: kind, DType: dt, Op: op, Count: count, Root: root, InPlace: inPlace,
									Seed: uint64(rep*1000 + count)}
								require.NoError(t, c.Check(ctx, mesh, viaCommsKind(comms)), "%s", c)
							}
							for r, cm := range comms {
								// The rank that sends needs the link to take the message at
								// once (2 KiB); the one that only receives does not.
								_, sends := oneWay(kind, r, root)
								fast := count > 0 && (count*s <= 2048 || !sends)
								took := cm.fast.pairs - before[r]
								if fast {
									require.EqualValues(t, 2, took, "rank %d, %s %s %s root %d, %d elements, in place %v: the fast path was not taken",
										r, kind, dt, op, root, count, inPlace)
								} else {
									require.Zero(t, took, "rank %d, %s %s root %d, %d elements: the fast path was taken", r, kind, dt, root, count)
								}
							}
						}
					}
				}
			}
		}
	}
}

// pairCalls runs n calls of each two-rank kind with 5-element float32 blocks on both
// ranks (Broadcast from rank i%2 in call i), checking every element against its formula.
func pairCalls(comms []*Comm, n int) []error {
	return runRanksInternal(comms, func(c *Comm) error {
		const m = 5
		ctx := context.Background()
		for i := range n {
			in := make([]float32, 2*m)
			for j := range in {
				in[j] = float32(1000*c.rank + 10*i + j)
			}
			val := func(rank, j int) float32 { return float32(1000*rank + 10*i + j) }
			out := make([]float32, 2*m)
			if err := c.AllGather(ctx, HostSlice(in[:m]), HostSlice(out), m, Float32); err != nil {
				return err
			}
			for j := range out {
				if want := val(j/m, j%m); out[j] != want {
					return fmt.Errorf("rank %d call %d: AllGather[%d] = %v, want %v", c.rank, i, j, out[j], want)
				}
			}
			if err := c.ReduceScatter(ctx, HostSlice(in), HostSlice(out[:m]), m, Float32, Sum); err != nil {
				return err
			}
			for j := range m {
				if want := val(0, c.rank*m+j) + val(1, c.rank*m+j); out[j] != want {
					return fmt.Errorf("rank %d call %d: ReduceScatter[%d] = %v, want %v", c.rank, i, j, out[j], want)
				}
			}
			if err := c.AllToAll(ctx, HostSlice(in), HostSlice(out), m, Float32); err != nil {
				return err
			}
			for j := range out {
				if want := val(j/m, c.rank*m+j%m); out[j] != want {
					return fmt.Errorf("rank %d call %d: AllToAll[%d] = %v, want %v", c.rank, i, j, out[j], want)
				}
			}
			if err := c.Broadcast(ctx, HostSlice(in[:m]), HostSlice(out[:m]), m, Float32, i%2); err != nil {
				return err
			}
			for j := range m {
				if want := val(i%2, j); out[j] != want {
					return fmt.Errorf("rank %d call %d: Broadcast[%d] = %v, want %v", c.rank, i, j, out[j], want)
				}
			}
		}
		return nil
	})
}

// One rank on the fast path and the other on the general one: the same messages.
func TestFastPairMeetsTheGeneralPath(t *testing.T) {
	comms := shmPair(t)
	comms[1].fast.try = nil
	for r, err := range pairCalls(comms, 20) {
		require.NoError(t, err, "rank %d", r)
	}
	require.EqualValues(t, 80, comms[0].fast.pairs)
	require.Zero(t, comms[1].fast.pairs)
	// And the rooted kinds, rank 0 sending and receiving.
	ctx := context.Background()
	mesh, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer mesh.Close()
	for _, kind := range []transport.Kind{transport.KindBroadcast, transport.KindScatter, transport.KindGather, transport.KindReduce} {
		for root := range 2 {
			for _, count := range []int{1, 5, 333} {
				c := algostest.Case{Kind: kind, DType: transport.Float32, Op: transport.Sum, Count: count, Root: root, Seed: uint64(count)}
				require.NoError(t, c.Check(ctx, mesh, viaCommsKind(comms)), "%s", c)
			}
		}
	}
	require.EqualValues(t, 80+4*2*3, comms[0].fast.pairs)
	require.Zero(t, comms[1].fast.pairs)
}

// Stats, the link's bytes and the flight record after fast calls read as the general
// path writes them: each call counted under its algorithm with its block's bytes, one
// block sent and one received per exchange and one sent or received per Broadcast,
// every record done.
func TestFastPairBooks(t *testing.T) {
	comms := shmPair(t)
	const n, block = 30, 5 * 4
	wire := make([]LinkTotals, 2)
	for r, c := range comms {
		wire[r] = c.Stats().Transport["shm"]
	}
	for r, err := range pairCalls(comms, n) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, c := range comms {
		require.EqualValues(t, 4*n, c.fast.pairs, "rank %d", c.rank)
		w := c.Stats().Transport["shm"]
		require.EqualValues(t, (3*n+n/2)*block, w.Sent-wire[c.rank].Sent, "rank %d: bytes sent", c.rank)
		require.EqualValues(t, (3*n+n/2)*block, w.Received-wire[c.rank].Received, "rank %d: bytes received", c.rank)
		s := c.Stats()
		require.EqualValues(t, 4*n, s.Ops, "rank %d", c.rank)
		require.Zero(t, s.Errors)
		require.EqualValues(t, 4*n*block, s.Bytes, "rank %d", c.rank)
		require.EqualValues(t, 3*n, s.ByAlgo["ring"].Calls, "rank %d: %v", c.rank, s.ByAlgo)
		require.EqualValues(t, n, s.ByAlgo["naive"].Calls, "rank %d: %v", c.rank, s.ByAlgo)
		recs := c.FlightRecord()
		require.NotEmpty(t, recs)
		for _, r := range recs {
			require.Equal(t, OpDone, r.State, "rank %d op %d", c.rank, r.Seq)
			require.False(t, r.Finished.Before(r.Started), "rank %d op %d", c.rank, r.Seq)
		}
		require.EqualValues(t, 4*n, recs[len(recs)-1].Seq)
	}
}

// Buffers the general path rejects are not taken by the fast path either: it reports
// what is wrong, on the rank that is wrong, and the peer's call fails instead of hanging.
func TestFastPairBadBuffers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		bad  func(c *Comm, buf []float32) error
		want string
	}{
		{"AllGather's Send inside Recv but not at the rank's block", func(c *Comm, buf []float32) error {
			return c.AllGather(ctx, HostSlice(buf[1:5]), HostSlice(buf[:8]), 4, Float32)
		}, "overlap"},
		{"ReduceScatter's Recv one element short", func(c *Comm, buf []float32) error {
			return c.ReduceScatter(ctx, HostSlice(buf[:8]), HostSlice(buf[8:11]), 4, Float32, Sum)
		}, "recv buffer is 12 bytes, need 16"},
		{"AllToAll's Send one element short", func(c *Comm, buf []float32) error {
			return c.AllToAll(ctx, HostSlice(buf[:7]), HostSlice(buf[8:16]), 4, Float32)
		}, "send buffer is 28 bytes, need 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := shmPair(t, WithTimeout(5*time.Second))
			errs := runRanksInternal(comms, func(c *Comm) error {
				buf := make([]float32, 16)
				if c.rank == 0 {
					return tc.bad(c, buf)
				}
				return c.AllGather(ctx, HostSlice(buf[:4]), HostSlice(buf[4:12]), 4, Float32)
			})
			require.ErrorIs(t, errs[0], transport.ErrInvalid)
			require.Contains(t, errs[0].Error(), "rank 0")
			require.Contains(t, errs[0].Error(), tc.want)
			require.Error(t, errs[1], "rank 1's AllGather")
			require.Zero(t, comms[0].fast.pairs)
		})
	}
}

// Queued calls (AllGatherAsync and the like, several in flight) take the fast paths when
// they come up (execute), and deliver every element.
func TestFastPairAsync(t *testing.T) {
	comms := shmPair(t)
	const n, m = 8, 3
	errs := runRanksInternal(comms, func(c *Comm) error {
		ctx := context.Background()
		val := func(rank, i, j int) float32 { return float32(1000*rank + 10*i + j) }
		ins := make([][]float32, n)
		outs := make([][4][]float32, n)
		var works []*Work
		for i := range n {
			ins[i] = make([]float32, 2*m)
			for j := range ins[i] {
				ins[i][j] = val(c.rank, i, j)
			}
			outs[i] = [4][]float32{make([]float32, 2*m), make([]float32, m), make([]float32, 2*m), make([]float32, m)}
			works = append(works,
				c.AllGatherAsync(ctx, HostSlice(ins[i][:m]), HostSlice(outs[i][0]), m, Float32),
				c.ReduceScatterAsync(ctx, HostSlice(ins[i]), HostSlice(outs[i][1]), m, Float32, Sum),
				c.AllToAllAsync(ctx, HostSlice(ins[i]), HostSlice(outs[i][2]), m, Float32),
				c.BroadcastAsync(ctx, HostSlice(ins[i][:m]), HostSlice(outs[i][3]), m, Float32, i%2))
		}
		for _, w := range works {
			if err := w.Wait(ctx); err != nil {
				return fmt.Errorf("rank %d: %w", c.rank, err)
			}
		}
		for i := range n {
			for j := range 2 * m {
				if got, want := outs[i][0][j], val(j/m, i, j%m); got != want {
					return fmt.Errorf("rank %d call %d: AllGather[%d] = %v, want %v", c.rank, i, j, got, want)
				}
				if got, want := outs[i][2][j], val(j/m, i, c.rank*m+j%m); got != want {
					return fmt.Errorf("rank %d call %d: AllToAll[%d] = %v, want %v", c.rank, i, j, got, want)
				}
			}
			for j := range m {
				if got, want := outs[i][1][j], val(0, i, c.rank*m+j)+val(1, i, c.rank*m+j); got != want {
					return fmt.Errorf("rank %d call %d: ReduceScatter[%d] = %v, want %v", c.rank, i, j, got, want)
				}
				if got, want := outs[i][3][j], val(i%2, i, j); got != want {
					return fmt.Errorf("rank %d call %d: Broadcast[%d] = %v, want %v", c.rank, i, j, got, want)
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		require.Greater(t, comms[r].fast.pairs, uint64(4*n/2), "rank %d: queued calls did not take the fast path", r)
	}
}

// Ranks that disagree on a call's count fail on both ranks with a mismatch, on the fast
// path as on the general one: the message's header carries the call's fingerprint. A
// rank that only sends (a Broadcast's root, a Gather's other rank) fails in its next
// call.
func TestFastPairMismatch(t *testing.T) {
	ctx := context.Background()
	for _, kind := range pairKinds {
		t.Run(kind.String(), func(t *testing.T) {
			comms := shmPair(t, WithTimeout(5*time.Second))
			errs := runRanksInternal(comms, func(c *Comm) error {
				count := 4 + c.rank // rank 0: 4 elements, rank 1: 5
				in, out := make([]float32, 2*count), make([]float32, 2*count)
				switch kind {
				case transport.KindAllGather:
					return c.AllGather(ctx, HostSlice(in[:count]), HostSlice(out), count, Float32)
				case transport.KindReduceScatter:
					return c.ReduceScatter(ctx, HostSlice(in), HostSlice(out[:count]), count, Float32, Sum)
				case transport.KindAllToAll:
					return c.AllToAll(ctx, HostSlice(in), HostSlice(out), count, Float32)
				case transport.KindScatter:
					return c.Scatter(ctx, HostSlice(in), HostSlice(out[:count]), count, Float32, 0)
				case transport.KindGather:
					return c.Gather(ctx, HostSlice(in[:count]), HostSlice(out), count, Float32, 0)
				case transport.KindReduce:
					return c.Reduce(ctx, HostSlice(in[:count]), HostSlice(out[:count]), count, Float32, Sum, 0)
				}
				return c.Broadcast(ctx, HostSlice(in[:count]), HostSlice(out[:count]), count, Float32, 0)
			})
			for r, err := range errs {
				if one, sends := oneWay(kind, r, 0); one && sends {
					// The rank that only sends, as on the general path, learns of the
					// mismatch from the receiver's abort, in its next call.
					require.NoError(t, err)
					err = comms[r].Barrier(ctx)
					require.Error(t, err, "rank %d's next call", r)
					require.Contains(t, err.Error(), fmt.Sprintf("rank %d", 1-r))
					continue
				}
				require.ErrorIs(t, err, transport.ErrMismatch, "rank %d", r)
			}
			require.Positive(t, comms[0].fast.pairs+comms[1].fast.pairs, "no rank took the fast path")
		})
	}
}
