package goccl

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/p2ptest"
	"github.com/goccl/goccl/internal/seeds"
	"github.com/goccl/goccl/transport"
)

// TestRandomCancel cancels one rank's call, or aborts its communicator, at a random
// moment (before the call starts, or 0 to 5 ms into it) in the middle of a sequence of AllReduces of random sizes, on
// communicators with random settings, and checks what the README promises: no rank
// waits for the timeout (a minute here), every call that returns without an error has
// the right sums, and a communicator that failed fails every later call.
//
// GOCCL_RANDOM_SEEDS=n runs n seeds from GOCCL_RANDOM_SEED, as TestRandomCalls does.
func TestRandomCancel(t *testing.T) {
	n := 10
	if testing.Short() || raceEnabled {
		n = 4
	}
	for _, seed := range seeds.List(t, n, 1) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { randomCancel(t, seed) })
	}
}

// cancelBound is how long a rank may take to return once a peer's call was cancelled:
// well under the one-minute timeout, above the 1.5 s after which a blocked rank
// compares its collective with its peers' (README, "Using the SDK").
const cancelBound = 15 * time.Second

func randomCancel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(splitmix(seed), splitmix(^seed)^0xca4ce1))
	s := randomSettings(rng)
	s.world = max(s.world, 2)
	ctx := context.Background()
	comms, err := InitLocal(ctx, s.world, s.options()...)
	require.NoError(t, err, "seed %d: %v", seed, s)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	shortTune(comms)
	calls := 6 + rng.IntN(6)
	victim, at := rng.IntN(s.world), rng.IntN(calls)
	delay := pick(rng, -1, 0, 50, 200, 1000, 5000) // us after the call starts; -1: before
	abort := rng.IntN(3) == 0                      // the victim calls Abort instead
	counts, kinds := make([]int, calls), make([]string, calls)
	for i := range counts {
		counts[i] = pick(rng, 1, 2, 255, 4096, 65537, 1<<20)
		kinds[i] = pick(rng, "allreduce", "allreduce", "alltoallv", "batch")
	}
	how := "cancelled"
	if abort {
		how = "aborted"
	}
	t.Logf("seed %d: %v; calls %v; rank %d's call %d of %d %s at %d us", seed, s, kinds, victim, at, calls, how, delay)

	// outcome is one rank's result of one call.
	type outcome struct {
		err  error
		took time.Duration
	}
	results := make([][]outcome, s.world)
	errs := runRanksInternal(comms, func(c *Comm) error {
		r := c.Rank()
		results[r] = make([]outcome, calls)
		for i, n := range counts {
			cctx, cancel := context.WithCancel(ctx)
			if r == victim && i == at {
				stop := cancel
				if abort {
					stop = func() { c.Abort(errors.New("the test aborts it")) }
				}
				if delay < 0 {
					stop()
				} else {
					time.AfterFunc(time.Duration(delay)*time.Microsecond, stop)
				}
			}
			start := time.Now()
			check, err := cancelCall(cctx, c, kinds[i], n, i)
			results[r][i] = outcome{err, time.Since(start)}
			cancel()
			if err == nil {
				if err := check(); err != nil {
					return fmt.Errorf("rank %d call %d (%s, %d elements) returned no error, and %w", r, i, kinds[i], n, err)
				}
			}
		}
		return nil
	})
	require.NoError(t, errors.Join(errs...), "seed %d: %v", seed, s)
	for r := range s.world {
		if err := results[r][at].err; err != nil {
			t.Logf("rank %d: %v", r, err)
		}
		failed := false
		for i, o := range results[r] {
			require.Less(t, o.took, cancelBound, "seed %d: rank %d's call %d took %v (error: %v)", seed, r, i, o.took, o.err)
			if failed {
				require.Error(t, o.err, "seed %d: rank %d's call %d succeeded after an earlier call failed", seed, r, i)
			}
			if o.err != nil {
				failed = true
				if i < at {
					t.Fatalf("seed %d: rank %d's call %d failed before the cancel (call %d): %v", seed, r, i, at, o.err)
				}
			}
		}
	}
	if o := results[victim][at]; o.err != nil && !abort {
		require.True(t, errors.Is(o.err, context.Canceled), "seed %d: the cancelled call's error does not say so: %v", seed, o.err)
	}
	if abort && delay < 0 { // aborted before the call: it cannot start
		require.ErrorIs(t, results[victim][at].err, transport.ErrClosed, "seed %d: a call after Abort", seed)
	}
}

// cancelCall runs call number i of randomCancel on c: an AllReduce of n float32, an
// AllToAllV of blocks of n/1, n/2 or n/3 elements, or a batch in which each rank sends
// n elements to each neighbour in the ring and receives theirs (ops in a different
// order on each rank). check verifies its result, when it returned no error.
func cancelCall(ctx context.Context, c *Comm, kind string, n, i int) (check func() error, err error) {
	r, w := c.Rank(), c.Size()
	switch kind {
	case "alltoallv":
		send, sc, rc, recvN := p2ptest.Blocks(r, w, 4, i, func(src, dst int) int { return n / (1 + (src+dst)%3) })
		recv := make([]byte, recvN)
		return func() error { return p2ptest.CheckBlocks(recv, r, 4, i, rc) }, c.AllToAllV(ctx, Host(send), sc, Host(recv), rc, Float32)
	case "batch":
		next, prev := (r+1)%w, (r+w-1)%w
		fromNext, fromPrev := make([]byte, 4*n), make([]byte, 4*n)
		ops := []P2POp{
			SendOp(Host(p2ptest.Bytes(4*n, r, next, i)), n, Float32, next),
			RecvOp(Host(fromPrev), n, Float32, prev),
			SendOp(Host(p2ptest.Bytes(4*n, r, prev, i)), n, Float32, prev),
			RecvOp(Host(fromNext), n, Float32, next),
		}
		if r%2 == 1 {
			slices.Reverse(ops)
		}
		return func() error {
			return errors.Join(p2ptest.Check(fromPrev, prev, r, i), p2ptest.Check(fromNext, next, r, i))
		}, c.BatchSendRecv(ctx, ops)
	}
	xs := make([]float32, n)
	for j := range xs {
		xs[j] = float32(r + 1 + j%7)
	}
	return func() error {
		for j, x := range xs {
			if want := float32(w*(w+1)/2 + w*(j%7)); x != want {
				return fmt.Errorf("element %d is %v, want %v", j, x, want)
			}
		}
		return nil
	}, c.AllReduce(ctx, HostSlice(xs), HostSlice(xs), n, Float32, Sum)
}

// TestBlockedSenderLearnsOfPeerFailure: a rank that only sends to a peer that failed
// cannot read that peer's abort frame, and once the link is full it blocks. The
// watchdog finds the failure in the store instead (checkFailed), so the sender fails
// within a few seconds, not at the timeout, and says which rank failed and why.
func TestBlockedSenderLearnsOfPeerFailure(t *testing.T) {
	comms, err := InitLocal(context.Background(), 2, WithChunkBytes(1024), WithAlgo("ring"), WithTimeout(time.Minute))
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	const n = 1 << 18 // 1 MiB of float32 in 1 KiB chunks: far more messages than inmem's queue holds
	errs := make([]error, 2)
	took := make([]time.Duration, 2)
	runRanksInternal(comms, func(c *Comm) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if c.Rank() == 0 {
			cancel() // rank 0 gives up before it starts; rank 1, the root, sends to it
		}
		start := time.Now()
		errs[c.Rank()] = c.Broadcast(ctx, HostSlice(make([]float32, n)), HostSlice(make([]float32, n)), n, Float32, 1)
		took[c.Rank()] = time.Since(start)
		return nil
	})
	require.ErrorIs(t, errs[0], context.Canceled)
	require.Error(t, errs[1])
	require.ErrorIs(t, errs[1], transport.ErrPeer)
	require.Contains(t, errs[1].Error(), "rank 0 (host "+comms[1].PeerHost(0)+") failed it (cancelled by its caller)")
	require.Less(t, took[1], 10*time.Second, "rank 1 waited %v: %v", took[1], errs[1])
}
