package goccl

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/p2ptest"
)

// A blocking BatchSendRecv's and AllToAllV's descriptions come back to the
// communicator (descHome) once the call has returned and a later operation's record has
// overwritten its own. These tests hold that against the flight recorder, which names
// every one of the last flightRecords calls by its own description, and against a record
// overwritten while its call still runs.

// TestDescriptionsComeBack: over 3 x flightRecords calls of varying shapes, every record
// names its own call, and the calls use few descriptions (without reuse, one each).
func TestDescriptionsComeBack(t *testing.T) {
	const calls = 3 * flightRecords
	comms := shmLocal(t, 2, WithTimeout(20*time.Second))
	type seen struct{ batches, a2avs map[any]bool }
	used := make([]seen, 2)
	names := make([][]string, 2) // rank, call: the name its record must give
	errs := runRanksInternal(comms, func(c *Comm) error {
		ctx := context.Background()
		r, peer := c.rank, 1-c.rank
		u := seen{map[any]bool{}, map[any]bool{}}
		for i := range calls {
			count := []int{0, 1, 7, 300, 1000}[i%5] // 1000 int32: past the fast path
			if i%2 == 0 {
				// Up to batchInline ops, and more (from its own allocation).
				ops := []P2POp{SendOp(Host(p2ptest.Bytes(4*count, r, peer, i)), count, Int32, peer)}
				recvs := make([][]byte, 1+i%6)
				for k := range recvs {
					recvs[k] = make([]byte, 4*count)
					ops = append(ops, RecvOp(Host(recvs[k]), count, Int32, peer))
					if k > 0 {
						ops = append(ops, SendOp(Host(p2ptest.Bytes(4*count, r, peer, i+k)), count, Int32, peer))
					}
				}
				names[r] = append(names[r], newBatchCall(ops).String())
				if err := c.BatchSendRecv(ctx, ops); err != nil {
					return fmt.Errorf("rank %d call %d: %w", r, i, err)
				}
				for k, got := range recvs {
					if err := p2ptest.Check(got, peer, r, i+k); err != nil {
						return fmt.Errorf("rank %d call %d, receive %d: %w", r, i, k, err)
					}
				}
				u.batches[c.flight.ops[(c.flight.n-1)%flightRecords].desc] = true
				continue
			}
			send, sc, rc, recvN := p2ptest.Blocks(r, 2, 4, i, func(src, dst int) int { return count + src })
			recv := make([]byte, recvN)
			a := new(allToAllV)
			a.spec(Host(send), sc, Host(recv), rc, Int32)
			names[r] = append(names[r], a.String())
			if err := c.AllToAllV(ctx, Host(send), sc, Host(recv), rc, Int32); err != nil {
				return fmt.Errorf("rank %d call %d: %w", r, i, err)
			}
			if err := p2ptest.CheckBlocks(recv, r, 4, i, rc); err != nil {
				return fmt.Errorf("rank %d call %d: %w", r, i, err)
			}
			u.a2avs[c.flight.ops[(c.flight.n-1)%flightRecords].desc] = true
		}
		used[r] = u
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for r, c := range comms {
		recs := c.FlightRecord()
		require.Len(t, recs, flightRecords)
		for k, rec := range recs {
			require.Equal(t, names[r][calls-flightRecords+k], rec.Op, "rank %d, record %d", r, rec.Seq)
			require.Equal(t, OpDone, rec.State, "rank %d, record %d", r, rec.Seq)
		}
		// Half the records are batches and half AllToAllVs: each kind cycles through
		// about half the records' worth of descriptions, plus the one in use.
		require.LessOrEqual(t, len(used[r].batches), flightRecords/2+2, "rank %d: batch descriptions", r)
		require.LessOrEqual(t, len(used[r].a2avs), flightRecords/2+2, "rank %d: AllToAllV descriptions", r)
	}
}

// TestDescriptionHeldWhileRunning: a batch's record is overwritten while the batch
// still runs (more than flightRecords operations queued behind it); its description
// stays the call's until it returns, and only then comes back, cleared of the
// caller's buffers. Under -race a description handed back early would race with the
// running call's reads of it.
func TestDescriptionHeldWhileRunning(t *testing.T) {
	comms := shmLocal(t, 2, WithTimeout(20*time.Second))
	ctx := context.Background()
	const count, queued = 100, flightRecords + 6
	batchDone := make([]chan error, 2)
	works := make([][]*Work, 2)
	sums := make([][][]float64, 2)
	start := func(c *Comm) *batchCall {
		r, peer := c.rank, 1-c.rank
		got := make([]byte, 4*count)
		ops := []P2POp{RecvOp(Host(got), count, Int32, peer), SendOp(Host(p2ptest.Bytes(4*count, r, peer, 7)), count, Int32, peer)}
		batchDone[r] = make(chan error, 1)
		go func() {
			err := c.BatchSendRecv(ctx, ops)
			if err == nil {
				err = p2ptest.Check(got, peer, r, 7)
			}
			batchDone[r] <- err
		}()
		// Queue the AllReduces only once the batch has started (rank 0's waits for rank
		// 1's, which finds rank 0's message and may end at once): the ranks must issue
		// them in the same order.
		require.Eventually(t, func() bool {
			recs := c.FlightRecord()
			return len(recs) > 0 && (recs[0].State == OpRunning || r == 1)
		}, 10*time.Second, time.Millisecond, "rank %d: the batch never ran", r)
		c.mu.Lock()
		b := c.flight.ops[(c.flight.n-1)%flightRecords].desc.(*batchCall)
		c.mu.Unlock()
		for i := range queued {
			xs := []float64{float64(r + i), 1}
			sums[r] = append(sums[r], xs)
			works[r] = append(works[r], c.AllReduceAsync(ctx, HostSlice(xs), HostSlice(xs), 2, Float64, Sum))
		}
		return b
	}
	// Rank 0's batch waits for rank 1's message while its record is overwritten.
	b := start(comms[0])
	require.EqualValues(t, 1, b.n.Load(), "rank 0: the overwritten record still holds the running batch's description")
	require.Nil(t, comms[0].batchHome.spare.Load(), "rank 0: the running batch's description came back")
	start(comms[1])
	for r := range comms {
		require.NoError(t, <-batchDone[r], "rank %d", r)
		for i, w := range works[r] {
			require.NoError(t, w.Wait(ctx), "rank %d, AllReduce %d", r, i)
			require.Equal(t, []float64{float64(1 + 2*i), 2}, sums[r][i], "rank %d, AllReduce %d", r, i)
		}
	}
	require.Eventually(t, func() bool { return comms[0].batchHome.spare.Load() == b }, 10*time.Second, time.Millisecond,
		"rank 0: the batch's description did not come back once the call returned")
	require.Nil(t, b.ops, "a description that came back still holds the caller's ops")
	for _, o := range b.inline {
		require.Zero(t, o.Buf.Len(), "a description that came back still holds the caller's buffers")
	}
}
