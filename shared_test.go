package goccl_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/shm"
	"github.com/goccl/goccl/transport"
)

func f32s(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// sharedInput is rank r's element i: small integers, so sums are exact in float32 and
// the float64 reference is the truth.
func sharedInput(r, i int) float32 { return float32((r*7+i*13)%101 - 50) }

// sharedAllReduce runs AllReduce over every rank's buffers at offset off(r) of memory
// from AllocShared (out of place, then in place) and checks it against a serial float64
// reference for sum, avg and max.
func sharedAllReduce(t *testing.T, comms []*goccl.Comm, count int, off func(r int) int) {
	t.Helper()
	checkedAllReduce(t, comms, count, func(c *goccl.Comm) ([]float32, []float32, func(), error) {
		ctx := context.Background()
		mem, err := c.AllocShared(ctx, 2*4*count+4096)
		if err != nil {
			return nil, nil, nil, err
		}
		o := off(c.Rank())
		return f32s(mem[o : o+4*count]), f32s(mem[o+4*count : o+8*count]), func() { c.FreeShared(ctx, mem) }, nil
	})
}

// checkedAllReduce runs AllReduce on every rank over the send and recv buffers of count
// float32 elements that bufs gives it (release, when not nil, runs after), out of place
// and in place, for sum, avg and max, and checks every element (checkSharedInputAllReduce).
func checkedAllReduce(t *testing.T, comms []*goccl.Comm, count int, bufs func(c *goccl.Comm) (send, recv []float32, release func(), err error)) {
	t.Helper()
	w := len(comms)
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx := context.Background()
		r := c.Rank()
		send, recv, release, err := bufs(c)
		if err != nil {
			return err
		}
		if release != nil {
			defer release()
		}
		for _, op := range []goccl.Op{goccl.Sum, goccl.Avg, goccl.Max} {
			for _, inPlace := range []bool{false, true} {
				for i := range send {
					send[i] = sharedInput(r, i)
					recv[i] = float32(math.NaN())
				}
				out := recv
				var err error
				if inPlace {
					out = send
					err = c.AllReduce(ctx, goccl.HostSlice(send), goccl.HostSlice(send), count, goccl.Float32, op)
				} else {
					err = c.AllReduce(ctx, goccl.HostSlice(send), goccl.HostSlice(recv), count, goccl.Float32, op)
				}
				if err != nil {
					return err
				}
				if err := checkSharedInputAllReduce(out, r, w, op, inPlace); err != nil {
					return err
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// checkSharedInputAllReduce checks rank r's AllReduce output out, over w ranks whose
// inputs are sharedInput, against a serial float64 reference for sum, avg and max.
func checkSharedInputAllReduce(out []float32, r, w int, op goccl.Op, inPlace bool) error {
	for i, got := range out {
		var want float64
		switch op {
		case goccl.Max:
			want = math.Inf(-1)
			for q := range w {
				want = math.Max(want, float64(sharedInput(q, i)))
			}
		default:
			for q := range w {
				want += float64(sharedInput(q, i))
			}
			if op == goccl.Avg {
				want /= float64(w)
			}
		}
		if math.Abs(float64(got)-want) > 1e-6*math.Max(1, math.Abs(want)) {
			return fmt.Errorf("rank %d %s in-place=%v count %d: element %d = %v, want %v", r, op, inPlace, len(out), i, got, want)
		}
	}
	return nil
}

func directCalls(c *goccl.Comm) uint64 { return c.Stats().ByAlgo["direct"].Calls }

// TestAllocSharedAllReduce: goroutine ranks over real shm windows, every buffer at a
// different offset on every rank, sizes 1 to 256K+3 elements (odd, not divisible by the
// world), with shm.direct_min 0 (every call reads in place) and at the default (only
// calls of shm.DirectMinFor(w) bytes and more do: 256 KiB at 2 ranks, 64 KiB beyond).
func TestAllocSharedAllReduce(t *testing.T) {
	for _, w := range []int{2, 3, 4} {
		for _, min := range []string{"0", ""} {
			t.Run(fmt.Sprintf("w%d/min=%q", w, min), func(t *testing.T) {
				opts := []goccl.Option{goccl.WithTransport("shm")}
				if min != "" {
					opts = append(opts, goccl.WithParam("shm.direct_min", min))
				}
				comms := local(t, w, opts...)
				want := uint64(0)
				for _, count := range []int{1, 7, 13, 1000, 1<<18 + 3} {
					sharedAllReduce(t, comms, count, func(r int) int { return 64 * r })
					if min == "0" || 4*count >= shm.DirectMinFor(w) {
						want += 6 // three ops, in and out of place
					}
					for r, c := range comms {
						require.Equal(t, want, directCalls(c), "rank %d after count %d", r, count)
					}
				}
			})
		}
	}
}

// TestAllocSharedOtherCollectives checks ReduceScatter, AllGather and Broadcast (the
// rest are in the real-process matrix, e2e.TestMatrixShared) on
// shared memory against serial references, in place and not, at 3 ranks.
func TestAllocSharedOtherCollectives(t *testing.T) {
	const w = 3
	comms := local(t, w, goccl.WithTransport("shm"), goccl.WithParam("shm.direct_min", "0"))
	for _, count := range []int{1, 13, 40001} {
		errs := runRanks(comms, func(c *goccl.Comm) error {
			ctx := context.Background()
			r := c.Rank()
			mem, err := c.AllocShared(ctx, 2*4*w*count)
			if err != nil {
				return err
			}
			defer c.FreeShared(ctx, mem)
			big := f32s(mem[:4*w*count])
			small := f32s(mem[4*w*count : 4*w*count+4*count])
			// ReduceScatter, out of place then in place (recv = send's block r).
			for _, inPlace := range []bool{false, true} {
				for i := range big {
					big[i] = sharedInput(r, i)
				}
				out := small
				if inPlace {
					out = big[r*count : (r+1)*count]
				}
				if err := c.ReduceScatter(ctx, goccl.HostSlice(big), goccl.HostSlice(out), count, goccl.Float32, goccl.Sum); err != nil {
					return err
				}
				for i, got := range out {
					want := 0.0
					for q := range w {
						want += float64(sharedInput(q, r*count+i))
					}
					if float64(got) != want {
						return fmt.Errorf("rank %d reducescatter in-place=%v: element %d = %v, want %v", r, inPlace, i, got, want)
					}
				}
			}
			// AllGather, out of place then in place (send = recv's block r).
			for _, inPlace := range []bool{false, true} {
				in := small
				if inPlace {
					in = big[r*count : (r+1)*count]
				}
				for i := range in {
					in[i] = sharedInput(r, i)
				}
				if err := c.AllGather(ctx, goccl.HostSlice(in), goccl.HostSlice(big), count, goccl.Float32); err != nil {
					return err
				}
				for i, got := range big {
					if want := sharedInput(i/count, i%count); got != want {
						return fmt.Errorf("rank %d allgather in-place=%v: element %d = %v, want %v", r, inPlace, i, got, want)
					}
				}
			}
			// Broadcast from every root.
			for root := range w {
				for i := range small {
					small[i] = sharedInput(r, i)
				}
				if err := c.Broadcast(ctx, goccl.HostSlice(small), goccl.HostSlice(small), count, goccl.Float32, root); err != nil {
					return err
				}
				for i, got := range small {
					if want := sharedInput(root, i); got != want {
						return fmt.Errorf("rank %d broadcast root %d: element %d = %v, want %v", r, root, i, got, want)
					}
				}
			}
			return nil
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d count %d", r, count)
		}
	}
	for r, c := range comms {
		require.Equal(t, uint64(3*(2+2+w)), directCalls(c), "rank %d", r)
	}
}

// TestAllocSharedNotEveryRank: when one rank's buffers are ordinary memory, every rank
// runs the call another way, with the same correct result.
func TestAllocSharedNotEveryRank(t *testing.T) {
	comms := local(t, 3, goccl.WithTransport("shm"), goccl.WithParam("shm.direct_min", "0"))
	const count = 5001
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx := context.Background()
		mem, err := c.AllocShared(ctx, 4*count)
		if err != nil {
			return err
		}
		xs := f32s(mem)
		if c.Rank() == 1 {
			xs = make([]float32, count)
		}
		for i := range xs {
			xs[i] = sharedInput(c.Rank(), i)
		}
		if err := goccl.AllReduceSlice(ctx, c, xs, goccl.Sum); err != nil {
			return err
		}
		for i, got := range xs {
			if want := sharedInput(0, i) + sharedInput(1, i) + sharedInput(2, i); got != want {
				return fmt.Errorf("rank %d element %d = %v, want %v", c.Rank(), i, got, want)
			}
		}
		return c.FreeShared(ctx, mem)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for r, c := range comms {
		require.Zero(t, directCalls(c), "rank %d", r)
	}
}

// TestAllocSharedConfig: "direct" named in the config falls back to the ring on memory
// that is not shared; a configured "ring" keeps shared memory on the ring.
func TestAllocSharedConfig(t *testing.T) {
	for _, tc := range []struct {
		algo   string
		shared bool
		direct bool
	}{{"direct", false, false}, {"direct", true, true}, {"ring", true, false}} {
		t.Run(fmt.Sprintf("%s/shared=%v", tc.algo, tc.shared), func(t *testing.T) {
			comms := local(t, 2, goccl.WithTransport("shm"), goccl.WithAlgo(tc.algo))
			const count = 100000
			errs := runRanks(comms, func(c *goccl.Comm) error {
				ctx := context.Background()
				xs := make([]float32, count)
				if tc.shared {
					mem, err := c.AllocShared(ctx, 4*count)
					if err != nil {
						return err
					}
					xs = f32s(mem)
				}
				for i := range xs {
					xs[i] = sharedInput(c.Rank(), i)
				}
				if err := goccl.AllReduceSlice(ctx, c, xs, goccl.Sum); err != nil {
					return err
				}
				for i, got := range xs {
					if want := sharedInput(0, i) + sharedInput(1, i); got != want {
						return fmt.Errorf("rank %d element %d = %v, want %v", c.Rank(), i, got, want)
					}
				}
				return nil
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for r, c := range comms {
				require.Equal(t, tc.direct, directCalls(c) == 1, "rank %d: %v", r, c.Stats().ByAlgo)
			}
		})
	}
}

// TestAllocSharedOverTCP: without shm links AllocShared hands out ordinary memory, and
// collectives on it run as on any other.
func TestAllocSharedOverTCP(t *testing.T) {
	comms := local(t, 2, goccl.WithTransport("tcp"), goccl.WithParam("shm.direct_min", "0"))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx := context.Background()
		mem, err := c.AllocShared(ctx, 4*1000)
		if err != nil {
			return err
		}
		xs := f32s(mem)
		for i := range xs {
			xs[i] = sharedInput(c.Rank(), i)
		}
		if err := goccl.AllReduceSlice(ctx, c, xs, goccl.Sum); err != nil {
			return err
		}
		if want := sharedInput(0, 999) + sharedInput(1, 999); xs[999] != want {
			return fmt.Errorf("rank %d: got %v, want %v", c.Rank(), xs[999], want)
		}
		return c.FreeShared(ctx, mem)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for _, c := range comms {
		require.Zero(t, directCalls(c))
	}
}

// TestAllocSharedErrors: a bad size, sizes that differ across ranks, and frees that do
// not match are errors on every rank, and the communicator stays usable.
func TestAllocSharedErrors(t *testing.T) {
	comms := local(t, 2, goccl.WithTransport("shm"))
	ctx := context.Background()
	_, err := comms[0].AllocShared(ctx, 0)
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "want at least 1")

	errs := runRanks(comms, func(c *goccl.Comm) error {
		_, err := c.AllocShared(ctx, 4096*(1+c.Rank()))
		return err
	})
	for r, err := range errs {
		require.ErrorIs(t, err, transport.ErrMismatch, "rank %d", r)
		require.ErrorContains(t, err, "every rank passes the same size", "rank %d", r)
	}

	mems := make([][]byte, 2)
	errs = runRanks(comms, func(c *goccl.Comm) error {
		var err error
		mems[c.Rank()], err = c.AllocShared(ctx, 1000)
		return err
	})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	// Rank 1 frees memory that is not from AllocShared: it is told so, rank 0 learns
	// that the ranks disagree, and nothing is freed.
	errs = runRanks(comms, func(c *goccl.Comm) error {
		b := mems[c.Rank()]
		if c.Rank() == 1 {
			b = make([]byte, 1000)
		}
		return c.FreeShared(ctx, b)
	})
	require.ErrorIs(t, errs[1], transport.ErrInvalid)
	require.ErrorContains(t, errs[1], "not memory from this communicator's AllocShared")
	require.ErrorIs(t, errs[0], transport.ErrMismatch)
	require.ErrorContains(t, errs[0], "rank 1 memory that is not from AllocShared")
	errs = runRanks(comms, func(c *goccl.Comm) error { return c.FreeShared(ctx, mems[c.Rank()]) })
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	errs = runRanks(comms, func(c *goccl.Comm) error { return c.FreeShared(ctx, mems[c.Rank()]) })
	for r, err := range errs {
		require.ErrorIs(t, err, transport.ErrInvalid, "rank %d: a second free", r)
	}
	errs = runRanks(comms, func(c *goccl.Comm) error { return c.Barrier(ctx) })
	require.NoError(t, errs[0], "the communicator stays usable")
}

// TestAllocSharedLeavesNothing: a window's name lives only while the ranks map it; a
// live allocation and one that Close releases leave nothing in /dev/shm.
func TestAllocSharedLeavesNothing(t *testing.T) {
	comms, err := goccl.InitLocal(context.Background(), 3, goccl.WithTransport("shm"))
	require.NoError(t, err)
	id := comms[0].ID()
	errs := runRanks(comms, func(c *goccl.Comm) error {
		_, err := c.AllocShared(context.Background(), 1<<20)
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	// RemoveSegments matches every name of the communicator (pair segments and windows
	// alike) and reports how many it had to remove.
	n, err := shm.RemoveSegments("", id)
	require.NoError(t, err)
	require.Zero(t, n, "names left while the allocation is live")
	for _, c := range comms {
		require.NoError(t, c.Close())
	}
	n, err = shm.RemoveSegments("", id)
	require.NoError(t, err)
	require.Zero(t, n, "names left after Close")
}
