package goccl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
)

// Every rank of a communicator assumes the same eager size: over shm a quarter of the
// ring, whatever each rank's own setting (the segment's creator sizes the ring).
func TestEagerAgreedAcrossRanks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []Option
		expect int
	}{
		{"inmem", nil, algos.EagerBytes},
		{"shm default ring", []Option{WithTransport("shm")}, (4 << 20) / 4},
		{"shm 256K ring", []Option{WithTransport("shm"), WithParam("shm.ring_bytes", "256K")}, (256 << 10) / 4},
		{"shm single-copy from 100000 B", []Option{WithTransport("shm"), WithParam("shm.single_copy_min", "100000")}, 100000 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			comms, err := InitLocal(ctx, 3, tc.opts...)
			require.NoError(t, err)
			for _, c := range comms {
				require.Equal(t, tc.expect, c.eager, "rank %d", c.rank)
				require.Equal(t, 0, c.chunk, "rank %d: not every link is tcp: the algorithms' default", c.rank)
				require.NoError(t, c.Close())
			}
		})
	}
}

// Over tcp the ranks agree on the eager size the sockets give (it depends on the host's
// socket buffer limits) and on the larger tcp pipelining unit; an explicit ChunkBytes wins.
func TestTCPChunkAgreed(t *testing.T) {
	for _, tc := range []struct {
		opts  []Option
		chunk int
	}{
		{[]Option{WithTransport("tcp")}, tcpChunkBytes},
		{[]Option{WithTransport("tcp"), WithChunkBytes(256 << 10)}, 256 << 10},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		comms, err := InitLocal(ctx, 3, tc.opts...)
		cancel()
		require.NoError(t, err)
		for _, c := range comms {
			require.Equal(t, comms[0].eager, c.eager, "rank %d", c.rank)
			require.GreaterOrEqual(t, c.eager, algos.EagerBytes)
			require.Equal(t, tc.chunk, c.chunk, "rank %d", c.rank)
			require.NoError(t, c.Close())
		}
	}
}

// Around the shm eager size (1 MiB here) the algorithms switch between their one-goroutine
// and their pipelined paths; both must give the reference result at 2, 3 and 4 ranks
// between real shared-memory rings, for every algorithm and the elementwise collectives.
func TestShmEagerBoundaryMatrix(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: the detector cannot see ordering through the shm rings' atomics (race_on_test.go); " +
			"this test runs in the plain go test ./...")
	}
	const eager = 1 << 20
	counts := []int{eager/4 - 1, eager / 4, eager/4 + 1, eager/8 + 3} // float32 elements
	for _, world := range []int{2, 3, 4} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		comms, err := InitLocal(ctx, world, WithTransport("shm"))
		require.NoError(t, err)
		require.Equal(t, eager, comms[0].eager)
		for _, algo := range []string{"ring", "tree", "naive"} {
			for _, kind := range []Kind{KindAllReduce, KindBroadcast, KindReduce} {
				for _, n := range counts {
					name := fmt.Sprintf("w%d/%s/%s/%d", world, algo, kind, n)
					require.NoError(t, eagerCase(ctx, comms, algo, kind, n), name)
				}
			}
		}
		for _, c := range comms {
			require.NoError(t, c.Close())
		}
		cancel()
	}
}

// Over tcp (1 MiB eager size, 2 MiB chunks) two ranks' ring swaps an AllReduce's whole
// input in one exchange up to algos.RingExchangeMax and runs its two steps of half the
// input each above it (ring.Algorithm.ExchangeTag, TestExchangeBoundary); both sides of
// that line, and sizes up to and past the eager size, must give the reference result
// between real sockets, in place (eagerCase) and out of place.
func TestTCPTwoRankExchangeBoundary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	comms, err := InitLocal(ctx, 2, WithTransport("tcp"))
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			require.NoError(t, c.Close())
		}
	}()
	require.Equal(t, tcpChunkBytes, comms[0].chunk)
	x := algos.RingExchangeMax / 4 // float32 elements
	for _, n := range []int{x - 1, x, x + 1, 3*x + 5, comms[0].eager / 4, comms[0].eager/4 + 3} {
		require.NoError(t, eagerCase(ctx, comms, "ring", KindAllReduce, n), "in place, %d elements", n)
		require.NoError(t, outOfPlaceSum(ctx, comms, n), "out of place, %d elements", n)
	}
}

// outOfPlaceSum runs a float32 sum AllReduce of n elements from Send into a separate
// Recv on every rank of comms, with the ring, and checks Recv against a serial float64
// reference and Send unchanged.
func outOfPlaceSum(ctx context.Context, comms []*Comm, n int) error {
	in := func(r, i int) float32 { return float32((r*13 + i*5) % 97) }
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			if err := c.SetAlgo("ring"); err != nil {
				errs[r] = err
				return
			}
			send, recv := make([]float32, n), make([]float32, n)
			for i := range send {
				send[i] = in(r, i)
			}
			if err := c.AllReduce(ctx, HostSlice(send), HostSlice(recv), n, Float32, Sum); err != nil {
				errs[r] = err
				return
			}
			for i := range recv {
				var want float64
				for q := range comms {
					want += float64(in(q, i))
				}
				if float64(recv[i]) != want || send[i] != in(r, i) {
					errs[r] = fmt.Errorf("rank %d: [%d] = %v (send %v), want %v (send %v)", r, i, recv[i], send[i], want, in(r, i))
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// eagerCase runs one collective on every rank of comms and checks it against a serial
// float64 reference. Inputs are small integers, so float32 sums are exact.
func eagerCase(ctx context.Context, comms []*Comm, algo string, kind Kind, n int) error {
	world := len(comms)
	in := func(r, i int) float32 { return float32((r*7 + i*3) % 101) }
	want := make([]float64, n)
	for i := range want {
		for r := range world {
			want[i] += float64(in(r, i))
		}
	}
	const root = 1
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			if err := c.SetAlgo(algo); err != nil {
				errs[r] = err
				return
			}
			xs := make([]float32, n)
			for i := range xs {
				xs[i] = in(r, i)
			}
			b := HostSlice(xs)
			var err error
			switch kind {
			case KindAllReduce:
				err = c.AllReduce(ctx, b, b, n, Float32, Sum)
			case KindBroadcast:
				err = c.Broadcast(ctx, b, b, n, Float32, root)
			case KindReduce:
				err = c.Reduce(ctx, b, b, n, Float32, Sum, root)
			}
			if err != nil {
				errs[r] = err
				return
			}
			for i, x := range xs {
				var w float64
				switch {
				case kind == KindBroadcast:
					w = float64(in(root, i))
				case kind == KindReduce && r != root:
					w = float64(in(r, i)) // a non-root's buffer is its input
				default:
					w = want[i]
				}
				if float64(x) != w {
					errs[r] = fmt.Errorf("rank %d: [%d] = %v, want %v", r, i, x, w)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// With one P the ring runs every size on the calling goroutine over shm (its 512 KiB
// chunks fit the 1 MiB eager size): steps larger than the eager size, and larger than the 4 MiB ring
// itself, go in chunks with each rank at most two messages ahead. A schedule that let a
// rank run further ahead could fill every ring at once and hang; these sizes would show
// it, and the values are checked against a serial float64 reference, for every ring
// collective including ReduceScatter's scratch reuse.
func TestShmRingChunkedSerial(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: the detector cannot see ordering through the shm rings' atomics (race_on_test.go); " +
			"this test runs in the plain go test ./...")
	}
	// One P, as the launcher gives each rank of a 2-core host with 2 ranks: the ring takes
	// its serial path for large steps only then (algos/ring, serialOK).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const eager = 1 << 20
	counts := []int{5*eager/4 + 7, 3<<20 + 1} // float32 elements: steps of 1.7-2.5 MiB, and 3-6 MiB
	for _, world := range []int{2, 3, 4} {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		comms, err := InitLocal(ctx, world, WithTransport("shm"), WithAlgo("ring"))
		require.NoError(t, err)
		require.Equal(t, eager, comms[0].eager)
		for _, kind := range []Kind{KindAllReduce, KindReduceScatter, KindAllGather, KindBroadcast, KindReduce} {
			for _, n := range counts {
				if kind == KindReduceScatter || kind == KindAllGather {
					n /= world // per rank: the big buffer stays about the same size
				}
				require.NoError(t, chunkedCase(ctx, comms, kind, n), "w%d/%s/%d", world, kind, n)
			}
		}
		for _, c := range comms {
			require.NoError(t, c.Close())
		}
		cancel()
	}
}

// chunkedCase runs kind with n elements per rank's small buffer (AllGather's input,
// ReduceScatter's output) on every rank and checks the result element by element.
func chunkedCase(ctx context.Context, comms []*Comm, kind Kind, n int) error {
	world := len(comms)
	in := func(r, i int) float32 { return float32((r*5 + i*11) % 97) }
	sum := func(i int) float64 {
		s := 0.0
		for r := range world {
			s += float64(in(r, i))
		}
		return s
	}
	const root = 2 % 3
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			sendN, recvN := n, n
			switch kind {
			case KindReduceScatter:
				sendN = world * n
			case KindAllGather:
				recvN = world * n
			}
			send, recv := make([]float32, sendN), make([]float32, recvN)
			for i := range send {
				send[i] = in(r, i)
			}
			s, d := HostSlice(send), HostSlice(recv)
			var err error
			switch kind {
			case KindAllReduce:
				err = c.AllReduce(ctx, s, d, n, Float32, Sum)
			case KindReduceScatter:
				err = c.ReduceScatter(ctx, s, d, n, Float32, Sum)
			case KindAllGather:
				err = c.AllGather(ctx, s, d, n, Float32)
			case KindBroadcast:
				err = c.Broadcast(ctx, s, d, n, Float32, root%world)
			case KindReduce:
				err = c.Reduce(ctx, s, d, n, Float32, Sum, root%world)
			}
			if err != nil {
				errs[r] = err
				return
			}
			if kind == KindReduce && r != root%world {
				return // recv is only written at the root
			}
			for i, x := range recv {
				var w float64
				switch kind {
				case KindAllReduce, KindReduce:
					w = sum(i)
				case KindReduceScatter:
					w = sum(r*n + i)
				case KindAllGather:
					w = float64(in(i/n, i%n))
				case KindBroadcast:
					w = float64(in(root%world, i))
				}
				if float64(x) != w {
					errs[r] = fmt.Errorf("rank %d: [%d] = %v, want %v", r, i, x, w)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
