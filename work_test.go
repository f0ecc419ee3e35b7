package goccl_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/transport"
)

// opData is rank r's input to operation i: distinct per operation, so an operation that
// ran on the wrong buffers (or out of order) shows in the values. Counts differ too, so a
// reordering between ranks is also a mismatch error.
func opData(i, r int) []float64 {
	xs := make([]float64, 1+(i*7)%23)
	for j := range xs {
		xs[j] = float64(i*1000 + j*10 + r)
	}
	return xs
}

// wantSum is the serial reference for the sum over ranks of opData(i, r).
func wantSum(i, world int) []float64 {
	out := make([]float64, len(opData(i, 0)))
	for r := range world {
		for j, x := range opData(i, r) {
			out[j] += x
		}
	}
	return out
}

// Async operations finish in issue order whoever waits: the issuing goroutine, other
// goroutines in reverse order, or nobody (Done only: the communicator's goroutine runs
// them). Blocking calls interleaved with them keep their place in the order.
func TestWorkWaitersAndIssueOrder(t *testing.T) {
	const world, ops = 3, 24
	comms := local(t, world, goccl.WithAlgo("ring"))
	ctx := context.Background()
	errs := runRanks(comms, func(c *goccl.Comm) error {
		bufs := make([][]float64, ops)
		works := make([]*goccl.Work, ops)
		for i := range ops {
			bufs[i] = opData(i, c.Rank())
			b := goccl.HostSlice(bufs[i])
			if i%5 == 4 { // a blocking call between queued ones
				if err := c.AllReduce(ctx, b, b, len(bufs[i]), goccl.Float64, goccl.Sum); err != nil {
					return err
				}
				continue
			}
			works[i] = c.AllReduceAsync(ctx, b, b, len(bufs[i]), goccl.Float64, goccl.Sum)
		}
		var wg sync.WaitGroup
		werrs := make([]error, ops)
		for i := ops - 1; i >= 0; i-- {
			w := works[i]
			switch {
			case w == nil:
			case i%3 == 0: // nobody calls Wait
				wg.Go(func() {
					select {
					case <-w.Done():
						werrs[i] = w.Err()
					case <-time.After(20 * time.Second):
						werrs[i] = fmt.Errorf("op %d never finished without a waiter", i)
					}
				})
			default:
				wg.Go(func() { werrs[i] = w.Wait(ctx) })
			}
		}
		wg.Wait()
		for i := range ops {
			if werrs[i] != nil {
				return fmt.Errorf("op %d: %w", i, werrs[i])
			}
			want := wantSum(i, world)
			for j := range want {
				if bufs[i][j] != want[j] {
					return fmt.Errorf("op %d [%d] = %v, want %v", i, j, bufs[i][j], want[j])
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// A collective that a peer never joins fails with ErrTimeout after Config.Timeout, also
// when the caller's context has no deadline; the communicator is unusable afterwards.
func TestTimeoutWithoutCallerDeadline(t *testing.T) {
	comms := local(t, 2, goccl.WithTimeout(300*time.Millisecond))
	xs := []float32{1, 2, 3}
	start := time.Now()
	err := comms[0].AllReduce(context.Background(), goccl.HostSlice(xs), goccl.HostSlice(xs), 3, goccl.Float32, goccl.Sum)
	require.ErrorIs(t, err, transport.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "it may not give up before the timeout")
	require.ErrorIs(t, comms[0].Barrier(context.Background()), transport.ErrTimeout, "sticky")
}

// The caller's own deadline, when earlier than Config.Timeout, bounds the operation.
func TestCallerDeadlineWins(t *testing.T) {
	comms := local(t, 2) // the default timeout is minutes
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	w := comms[0].BarrierAsync(ctx)
	err := w.Wait(context.Background())
	require.ErrorIs(t, err, transport.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// Cancelling the caller's context while the operation runs fails it with
// context.Canceled (not a timeout), and the communicator with it.
func TestCallerCancelMidOperation(t *testing.T) {
	comms := local(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err := comms[0].Barrier(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, transport.ErrTimeout), "%v", err)
	require.Error(t, comms[0].Err())
}

// A context that ended before the operation started fails it without touching the links.
func TestCancelledBeforeStart(t *testing.T) {
	comms := local(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, comms[0].Barrier(ctx), context.Canceled)
}

// Close runs what was queued before it, then later calls fail with ErrClosed.
func TestCloseFinishesQueuedWork(t *testing.T) {
	const world, ops = 2, 10
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comms, err := goccl.InitLocal(ctx, world)
	require.NoError(t, err)
	bufs := make([][][]float64, world)
	works := make([][]*goccl.Work, world)
	for r, c := range comms {
		for i := range ops {
			bufs[r] = append(bufs[r], opData(i, r))
			b := goccl.HostSlice(bufs[r][i])
			works[r] = append(works[r], c.AllReduceAsync(ctx, b, b, len(bufs[r][i]), goccl.Float64, goccl.Sum))
		}
	}
	for _, err := range runRanks(comms, func(c *goccl.Comm) error { return c.Close() }) {
		require.NoError(t, err)
	}
	for r := range world {
		for i, w := range works[r] {
			require.NoError(t, w.Err(), "rank %d op %d", r, i) // Close returned, so each is done
			require.Equal(t, wantSum(i, world), bufs[r][i], "rank %d op %d", r, i)
		}
		require.ErrorIs(t, comms[r].Barrier(ctx), transport.ErrClosed)
	}
}

// TestCloseWhileBlockedEndsAtDeadline: Close waits for an operation blocked on a peer
// that never calls, but no longer than the operation's deadline (the watchdog that
// enforces it runs until Close is done with the operations; it used to stop first, and
// Close then waited forever). The operation fails with ErrTimeout, for both the inline
// (blocking) and the queued (asynchronous) path.
func TestCloseWhileBlockedEndsAtDeadline(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			comms := local(t, 2, goccl.WithTimeout(time.Second))
			xs := make([]float32, 4)
			b := goccl.HostSlice(xs)
			var work *goccl.Work
			done := make(chan error, 1)
			if async {
				work = comms[0].AllReduceAsync(context.Background(), b, b, len(xs), goccl.Float32, goccl.Sum)
			} else {
				go func() { done <- comms[0].AllReduce(context.Background(), b, b, len(xs), goccl.Float32, goccl.Sum) }()
			}
			time.Sleep(100 * time.Millisecond) // rank 0 is blocked on rank 1, which never calls
			closed := make(chan struct{})
			go func() { comms[0].Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(20 * time.Second):
				t.Fatal("Close still waiting 20 s after an operation's 1 s deadline")
			}
			var err error
			if async {
				err = work.Wait(context.Background())
			} else {
				err = <-done
			}
			require.ErrorIs(t, err, transport.ErrTimeout)
		})
	}
}

// Wait's context bounds the wait, not the operation: a waiter that gives up leaves the
// operation running, and it completes once the peer joins.
func TestWaitGivesUpWithoutCancelling(t *testing.T) {
	comms := local(t, 2)
	bg := context.Background()
	xs := opData(3, 0)
	w := comms[0].AllReduceAsync(bg, goccl.HostSlice(xs), goccl.HostSlice(xs), len(xs), goccl.Float64, goccl.Sum)
	short, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, w.Wait(short), context.DeadlineExceeded)
	require.NoError(t, comms[0].Err(), "giving up on the wait must not fail the communicator")
	ys := opData(3, 1)
	require.NoError(t, comms[1].AllReduce(bg, goccl.HostSlice(ys), goccl.HostSlice(ys), len(ys), goccl.Float64, goccl.Sum))
	require.NoError(t, w.Wait(bg))
	require.Equal(t, wantSum(3, 2), xs)
	require.Equal(t, wantSum(3, 2), ys)
}

// A caller context watches only the operations issued under it: after several calls
// under one context, ending it cancels the one then running under it, and ending a
// context whose calls are over leaves an operation of another context alone.
func TestCallerContextWatchesItsOwnOperations(t *testing.T) {
	comms := local(t, 2)
	bg := context.Background()
	first, cancelFirst := context.WithCancel(bg)
	defer cancelFirst()
	for i := range 3 {
		for r, err := range runRanks(comms, func(c *goccl.Comm) error {
			xs := opData(i, c.Rank())
			if err := c.AllReduce(first, goccl.HostSlice(xs), goccl.HostSlice(xs), len(xs), goccl.Float64, goccl.Sum); err != nil {
				return err
			}
			if !slices.Equal(wantSum(i, 2), xs) {
				return fmt.Errorf("op %d: got %v, want %v", i, xs, wantSum(i, 2))
			}
			return nil
		}) {
			require.NoError(t, err, "rank %d", r)
		}
	}
	// Rank 0 starts an operation under a second context; ending the first (whose
	// calls are all done) must not touch it, and it completes when rank 1 joins.
	second, cancelSecond := context.WithCancel(bg)
	defer cancelSecond()
	xs := opData(7, 0)
	w := comms[0].AllReduceAsync(second, goccl.HostSlice(xs), goccl.HostSlice(xs), len(xs), goccl.Float64, goccl.Sum)
	time.Sleep(50 * time.Millisecond) // let it start and block on rank 1
	cancelFirst()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, comms[0].Err(), "ending a context with no running operation must not fail the communicator")
	ys := opData(7, 1)
	require.NoError(t, comms[1].AllReduce(bg, goccl.HostSlice(ys), goccl.HostSlice(ys), len(ys), goccl.Float64, goccl.Sum))
	require.NoError(t, w.Wait(bg))
	require.Equal(t, wantSum(7, 2), xs)
	// Now an operation under the second context, which has been armed before: ending
	// it mid-way cancels that operation.
	time.AfterFunc(100*time.Millisecond, cancelSecond)
	err := comms[0].Barrier(second)
	require.ErrorIs(t, err, context.Canceled)
	// The communicator fails once the cancelled operation ends: at once when Barrier ran
	// it on this goroutine, a moment later when it found the communicator's goroutine
	// still finishing the previous operation and queued behind it (Work.Wait returns when
	// its context ends and leaves the operation to fail in the background).
	require.Eventually(t, func() bool { return comms[0].Err() != nil }, 10*time.Second, time.Millisecond)
}
