package goccl

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/internal/p2ptest"
	"github.com/goccl/goccl/transport"
)

// The fast path of BatchSendRecv and AllToAllV (group.go, fastXfers): the values every
// receive is checked against are the sender's formula (p2ptest), in place and apart;
// which path a call took is read from the path's counters, so that a test of the fast
// path cannot pass on the general one.

// groupCall runs call on c and reports whether it took the fast path, and whether the
// fast path sent part of it the general way (fastRest).
func groupCall(c *Comm, call func() error) (fast, rest bool, err error) {
	g, r := c.fast.groups, c.fast.rests
	err = call()
	return c.fast.groups != g, c.fast.rests != r, err
}

// halo is rank r's batch with both ring neighbours, count int32 each way: sends of
// message tag, and receives into recvNext and recvPrev. In place, each receive writes
// the memory a send of the same batch reads.
func halo(r, world, count, tag int, inPlace bool) (ops []P2POp, recvNext, recvPrev []byte) {
	next, prev := (r+1)%world, (r+world-1)%world
	n := 4 * count
	toNext, toPrev := p2ptest.Bytes(n, r, next, tag), p2ptest.Bytes(n, r, prev, tag+1)
	recvNext, recvPrev = make([]byte, n), make([]byte, n)
	if inPlace {
		recvNext, recvPrev = toNext, toPrev
	}
	return []P2POp{
		RecvOp(Host(recvPrev), count, Int32, prev),
		SendOp(Host(toNext), count, Int32, next),
		SendOp(Host(toPrev), count, Int32, prev),
		RecvOp(Host(recvNext), count, Int32, next),
	}, recvNext, recvPrev
}

// inPlaceBlocks returns an AllToAllV's send buffer and a receive buffer of recvN bytes:
// apart, or the same memory.
func inPlaceBlocks(send []byte, recvN int, inPlace bool) ([]byte, []byte) {
	if !inPlace {
		return send, make([]byte, recvN)
	}
	buf := make([]byte, max(len(send), recvN))
	copy(buf, send)
	return buf[:len(send)], buf[:recvN]
}

// TestFastGroupValues: a halo batch and an AllToAllV whose messages the shm link takes
// at once (up to 2 KiB) take the fast path at 2 and 3 ranks, over and over, in place
// and apart, and deliver every byte; larger messages take the general path, or the
// fast path's rest where the first message went at once, and deliver too.
func TestFastGroupValues(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			comms := shmLocal(t, world, WithTimeout(20*time.Second))
			// int32 counts: 0, 1, odd, and 2 KiB in all take the fast path; 2 KiB + 4
			// bytes and 32 KiB do not.
			sizes := []struct {
				count int
				fast  bool
			}{{0, true}, {1, true}, {7, true}, {255, true}, {512, true}, {513, false}, {8 << 10, false}}
			errs := runRanksInternal(comms, func(c *Comm) error {
				ctx := context.Background()
				r := c.rank
				next, prev := (r+1)%world, (r+world-1)%world
				for i, sz := range sizes {
					for call := range 3 {
						for _, inPlace := range []bool{false, true} {
							tag := 100*i + 10*call
							what := fmt.Sprintf("rank %d: halo batch of %d int32, call %d, in place %v", r, sz.count, call, inPlace)
							ops, recvNext, recvPrev := halo(r, world, sz.count, tag, inPlace)
							fast, _, err := groupCall(c, func() error { return c.BatchSendRecv(ctx, ops) })
							if err != nil {
								return fmt.Errorf("%s: %w", what, err)
							}
							// The first call of a link may find its peer not yet attached.
							if fast != sz.fast && (call > 0 || i > 0) {
								return fmt.Errorf("%s: took the fast path %v, want %v", what, fast, sz.fast)
							}
							if err := p2ptest.Check(recvPrev, prev, r, tag); err != nil {
								return fmt.Errorf("%s: %w", what, err)
							}
							if err := p2ptest.Check(recvNext, next, r, tag+1); err != nil {
								return fmt.Errorf("%s: %w", what, err)
							}

							what = fmt.Sprintf("rank %d: AllToAllV of blocks up to %d int32, call %d, in place %v", r, sz.count, call, inPlace)
							// Uneven blocks: at most sz.count where that goes at once, else more.
							count := func(src, dst int) int {
								if sz.fast {
									return max(0, sz.count-(src+2*dst)%3)
								}
								return sz.count + (src+2*dst)%3
							}
							send, sc, rc, recvN := p2ptest.Blocks(r, world, 4, tag, count)
							send, recv := inPlaceBlocks(send, recvN, inPlace)
							fast, _, err = groupCall(c, func() error { return c.AllToAllV(ctx, Host(send), sc, Host(recv), rc, Int32) })
							if err != nil {
								return fmt.Errorf("%s: %w", what, err)
							}
							if fast != sz.fast {
								return fmt.Errorf("%s: took the fast path %v, want %v", what, fast, sz.fast)
							}
							if err := p2ptest.CheckBlocks(recv, r, 4, tag, rc); err != nil {
								return fmt.Errorf("%s: %w", what, err)
							}
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

// TestFastGroupRest: where the first message goes at once and a later one does not
// (here: larger than the link takes at once), the fast path sends the rest the general
// way. In place, the rest's sends go from copies: an AllToAllV's block to this rank
// itself, copied before the receives, overwrites the memory of the block the rest
// sends to rank+2, and the batch's receives the memory its second send reads.
func TestFastGroupRest(t *testing.T) {
	const world = 3
	comms := shmLocal(t, world, WithTimeout(20*time.Second))
	errs := runRanksInternal(comms, func(c *Comm) error {
		ctx := context.Background()
		r := c.rank
		next, prev := (r+1)%world, (r+world-1)%world
		for call := range 4 {
			// AllToAllV: 2 int32 to rank+1 (first in the pairwise order), 2000 to
			// rank+2, and 700 to itself, in place.
			count := func(src, dst int) int {
				switch dst {
				case (src + 1) % world:
					return 2
				case (src + 2) % world:
					return 2000
				}
				return 700
			}
			send, sc, rc, recvN := p2ptest.Blocks(r, world, 4, call, count)
			send, recv := inPlaceBlocks(send, recvN, true)
			fast, rest, err := groupCall(c, func() error { return c.AllToAllV(ctx, Host(send), sc, Host(recv), rc, Int32) })
			if err != nil {
				return fmt.Errorf("rank %d, AllToAllV %d: %w", r, call, err)
			}
			if call > 0 && !(fast && rest) {
				return fmt.Errorf("rank %d, AllToAllV %d: fast path %v, rest %v; want both", r, call, fast, rest)
			}
			if err := p2ptest.CheckBlocks(recv, r, 4, call, rc); err != nil {
				return fmt.Errorf("rank %d, AllToAllV %d: %w", r, call, err)
			}

			// A batch: 8 bytes to next, then 16 KiB to next out of the memory the
			// receive from prev writes.
			small, big := p2ptest.Bytes(8, r, next, call), p2ptest.Bytes(16<<10, r, next, call+10)
			gotSmall := make([]byte, 8)
			ops := []P2POp{
				SendOp(Host(small), 8, Uint8, next),
				SendOp(Host(big), 4<<10, Float32, next),
				RecvOp(Host(gotSmall), 8, Uint8, prev),
				RecvOp(Host(big), 4<<10, Float32, prev),
			}
			fast, rest, err = groupCall(c, func() error { return c.BatchSendRecv(ctx, ops) })
			if err != nil {
				return fmt.Errorf("rank %d, batch %d: %w", r, call, err)
			}
			if call > 0 && !(fast && rest) {
				return fmt.Errorf("rank %d, batch %d: fast path %v, rest %v; want both", r, call, fast, rest)
			}
			if err := p2ptest.Check(gotSmall, prev, r, call); err != nil {
				return fmt.Errorf("rank %d, batch %d: %w", r, call, err)
			}
			if err := p2ptest.Check(big, prev, r, call+10); err != nil {
				return fmt.Errorf("rank %d, batch %d: %w", r, call, err)
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// Stats, the links' byte counts and the flight recorder read fast batches and
// AllToAllVs as the general path writes them.
func TestFastGroupBooks(t *testing.T) {
	const world, calls = 3, 40
	comms := shmLocal(t, world, WithTimeout(20*time.Second))
	wire := make([]LinkTotals, world)
	for r, c := range comms {
		wire[r] = c.Stats().Transport["shm"] // Init's own messages
	}
	errs := runRanksInternal(comms, func(c *Comm) error {
		ctx := context.Background()
		for call := range calls {
			ops, _, _ := halo(c.rank, world, 3, call, false)
			if err := c.BatchSendRecv(ctx, ops); err != nil {
				return err
			}
			send, sc, rc, recvN := p2ptest.Blocks(c.rank, world, 8, call, func(src, dst int) int { return 1 + src + dst })
			if err := c.AllToAllV(ctx, Host(send), sc, Host(make([]byte, recvN)), rc, Float64); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for _, c := range comms {
		r := c.rank
		require.Greater(t, c.fast.groups, uint64(2*calls-4), "rank %d: the fast path was not taken", r)
		s := c.Stats()
		require.EqualValues(t, 2*calls, s.Ops, "rank %d", r)
		require.Zero(t, s.Errors)
		// A batch moves 4 x 12 bytes (Stats counts sends and receives, as the general
		// path does); an AllToAllV its send blocks.
		var a2a, sentA2A, recvA2A int
		for p := range world {
			a2a += 8 * (1 + r + p)
			if p != r {
				sentA2A += 8 * (1 + r + p)
				recvA2A += 8 * (1 + p + r)
			}
		}
		p := s.ByAlgo["p2p"]
		require.EqualValues(t, 2*calls, p.Calls, "rank %d: %v", r, s.ByAlgo)
		require.EqualValues(t, calls*(4*12+a2a), p.Bytes, "rank %d", r)
		require.Positive(t, p.Time, "rank %d: no time recorded", r)
		w := s.Transport["shm"]
		require.EqualValues(t, calls*(2*12+sentA2A), w.Sent-wire[r].Sent, "rank %d: bytes sent", r)
		require.EqualValues(t, calls*(2*12+recvA2A), w.Received-wire[r].Received, "rank %d: bytes received", r)
		recs := c.FlightRecord()
		require.NotEmpty(t, recs)
		for _, rec := range recs {
			require.Equal(t, OpDone, rec.State, "rank %d op %s", r, rec.Op)
			require.Equal(t, "p2p", rec.Algo)
			require.False(t, rec.Finished.Before(rec.Started), "rank %d op %s", r, rec.Op)
		}
		require.Contains(t, recs[len(recs)-2].Op, "batch of 4: recv 3 int32 from rank")
		require.Contains(t, recs[len(recs)-1].Op, "alltoallv float64 send [")
	}
}

// A fast batch whose peer never sends times out under the communicator's timeout and
// fails the communicator; a rank on the general path meets one on the fast path.
func TestFastGroupTimesOutAndMixed(t *testing.T) {
	const timeout = 300 * time.Millisecond
	comms := shmLocal(t, 2, WithTimeout(timeout))
	exchange := func(n int) []error {
		return runRanksInternal(comms, func(c *Comm) error {
			for call := range n {
				ops, recvNext, _ := halo(c.rank, 2, 5, call, true)
				if err := c.BatchSendRecv(context.Background(), ops); err != nil {
					return err
				}
				if err := p2ptest.Check(recvNext, 1-c.rank, c.rank, call+1); err != nil {
					return fmt.Errorf("rank %d, call %d: %w", c.rank, call, err)
				}
			}
			return nil
		})
	}
	for r, err := range exchange(10) {
		require.NoError(t, err, "rank %d", r)
	}
	// Rank 1's link offers no TrySend now: its batches take the general path.
	try := comms[1].obsLink(0).try
	comms[1].obsLink(0).try = nil
	before := []uint64{comms[0].fast.groups, comms[1].fast.groups}
	for r, err := range exchange(10) {
		require.NoError(t, err, "rank %d", r)
	}
	require.EqualValues(t, 10, comms[0].fast.groups-before[0])
	require.EqualValues(t, 0, comms[1].fast.groups-before[1])
	comms[1].obsLink(0).try = try

	before[0] = comms[0].fast.groups
	wire := comms[0].Stats().Transport["shm"]
	start := time.Now()
	got := make([]byte, 8)
	err := comms[0].BatchSendRecv(context.Background(), []P2POp{SendOp(Host(make([]byte, 8)), 8, Uint8, 1), RecvOp(Host(got), 8, Uint8, 1)})
	require.Error(t, err)
	require.True(t, errors.Is(err, transport.ErrTimeout), "%v", err)
	require.Contains(t, err.Error(), "recv from rank 1")
	require.Contains(t, err.Error(), "timed out waiting to receive from rank 1", "the observer's words: who this rank waited for")
	w := comms[0].Stats().Transport["shm"]
	require.Equal(t, wire.Received, w.Received, "a receive that failed is not counted")
	require.GreaterOrEqual(t, w.Sent, wire.Sent+8, "the send that left is")
	require.Less(t, time.Since(start), 10*timeout)
	require.Equal(t, before[0]+1, comms[0].fast.groups, "the call did not take the fast path")
	require.Error(t, comms[0].Err())
	recs := comms[0].FlightRecord()
	require.Equal(t, OpFailed, recs[len(recs)-1].State)
}

// receivesInto's binary search against the pairwise check it replaced, over random
// ranges of one buffer that two host receives write in part, with a device receive at
// the same numeric addresses (another address space, which no host send can share).
func TestReceivesInto(t *testing.T) {
	comms := shmLocal(t, 1)
	c := comms[0]
	big := make([]byte, 1000)
	base := uintptr(unsafe.Pointer(&big[0]))
	recvs := [][]byte{big[100:200], big[300:400], big[401:402]}
	ops := []P2POp{
		RecvOp(Host(recvs[1]), 100, Uint8, 0),
		SendOp(Host(big[150:350]), 200, Uint8, 0),
		RecvOp(DeviceBuffer(base+500, 100, 0), 100, Uint8, 0),
		RecvOp(Host(recvs[0]), 100, Uint8, 0),
		RecvOp(Host(recvs[2]), 1, Uint8, 0),
		RecvOp(Host(big[700:700]), 0, Uint8, 0), // empty: writes nothing
	}
	require.NoError(t, c.checkRecvsApart(ops))
	for lo := 0; lo <= len(big); lo += 7 {
		for _, n := range []int{0, 1, 2, 50, 99, 100, 101, 250, 1000} {
			if lo+n > len(big) {
				continue
			}
			p := big[lo : lo+n]
			want := false
			for _, r := range recvs {
				want = want || !algos.Apart(p, r)
			}
			require.Equal(t, want, c.receivesInto(p), "big[%d:%d]", lo, lo+n)
		}
	}
	for _, b := range [][2]int{{0, 100}, {200, 300}, {400, 401}, {402, 1000}, {99, 101}, {199, 200}, {399, 400}, {401, 402}} {
		p := big[b[0]:b[1]]
		want := false
		for _, r := range recvs {
			want = want || !algos.Apart(p, r)
		}
		require.Equal(t, want, c.receivesInto(p), "big[%d:%d]", b[0], b[1])
	}
}

// Queued batches and AllToAllVs take the fast path when they run (execute), as queued
// collectives do, and finish with their values and books.
func TestFastGroupAsync(t *testing.T) {
	const world, calls = 2, 20
	comms := shmLocal(t, world, WithTimeout(20*time.Second))
	errs := runRanksInternal(comms, func(c *Comm) error {
		ctx := context.Background()
		r := c.rank
		before := c.fast.groups
		for call := range calls {
			ops, recvNext, recvPrev := halo(r, world, 5, 2*call, call%2 == 0)
			send, sc, rc, recvN := p2ptest.Blocks(r, world, 4, call, func(src, dst int) int { return 3 + src + 2*dst })
			recv := make([]byte, recvN)
			wb := c.BatchSendRecvAsync(ctx, ops)
			wa := c.AllToAllVAsync(ctx, Host(send), sc, Host(recv), rc, Int32)
			if err := wa.Wait(ctx); err != nil {
				return fmt.Errorf("rank %d, AllToAllVAsync %d: %w", r, call, err)
			}
			if err := wb.Wait(ctx); err != nil {
				return fmt.Errorf("rank %d, BatchSendRecvAsync %d: %w", r, call, err)
			}
			if err := p2ptest.Check(recvPrev, 1-r, r, 2*call); err != nil {
				return fmt.Errorf("rank %d, batch %d: %w", r, call, err)
			}
			if err := p2ptest.Check(recvNext, 1-r, r, 2*call+1); err != nil {
				return fmt.Errorf("rank %d, batch %d: %w", r, call, err)
			}
			if err := p2ptest.CheckBlocks(recv, r, 4, call, rc); err != nil {
				return fmt.Errorf("rank %d, AllToAllV %d: %w", r, call, err)
			}
		}
		if got := c.fast.groups - before; got < 2*calls-2 {
			return fmt.Errorf("rank %d: %d of %d queued calls took the fast path", r, got, 2*calls)
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for _, c := range comms {
		s := c.Stats()
		require.EqualValues(t, 2*calls, s.ByAlgo["p2p"].Calls, "rank %d: %v", c.rank, s.ByAlgo)
		for _, rec := range c.FlightRecord() {
			require.Equal(t, OpDone, rec.State, "rank %d op %s", c.rank, rec.Op)
		}
	}
}

// p2pXfer writes a message's fingerprint field by field; it must be the one
// call.fingerprint gives a SendRecv or an AllToAllV of the same count and dtype, which
// the peer's Send, SendRecv or general path expects.
func TestP2PXferFingerprint(t *testing.T) {
	c := shmLocal(t, 1)[0]
	for _, kind := range []Kind{KindSendRecv, transport.KindAllToAllV} {
		for dt := range DType(10) {
			for _, count := range []int{0, 1, 7, 1 << 20} {
				xs := c.p2pXfer(nil, 0, count%2 == 0, kind, count, dt, nil)
				want := (&call{kind: kind, count: count, dt: dt, op: Max, root: 3}).fingerprint()
				require.Equal(t, want, xs[0].h.Fp, "%s of %d %s", kind, count, dt)
			}
		}
	}
}
