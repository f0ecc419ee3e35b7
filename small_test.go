package goccl_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
)

// A small AllReduce runs as one exchange with its choice of algorithm resolved once per
// size (Comm.exchange). These tests hold that shortcut to what the general path does:
// it follows SetAlgo, it counts the algorithm that ran it, and buffers it cannot take
// get the general path's errors, on the rank at fault and on its peers.

// The choice is made again when the algorithm spec changes and when the size or the
// element size changes; each result is checked against the serial sum, and Stats names
// the algorithm that ran each call.
func TestSmallAllReduceFollowsTheChoice(t *testing.T) {
	ctx := context.Background()
	comms := local(t, 2, goccl.WithAlgo("ring"))
	run := func(count int, dt goccl.DType) {
		t.Helper()
		errs := runRanks(comms, func(c *goccl.Comm) error {
			switch dt {
			case goccl.Float32:
				xs := make([]float32, count)
				for i := range xs {
					xs[i] = float32(c.Rank()*1000 + i)
				}
				if err := c.AllReduce(ctx, goccl.HostSlice(xs), goccl.HostSlice(xs), count, dt, goccl.Sum); err != nil {
					return err
				}
				for i, x := range xs {
					if want := float32(0*1000+i) + float32(1*1000+i); x != want {
						return fmt.Errorf("rank %d: element %d is %v, want %v", c.Rank(), i, x, want)
					}
				}
			case goccl.Float64:
				xs := make([]float64, count)
				for i := range xs {
					xs[i] = float64(c.Rank()*1000+i) / 4
				}
				if err := c.AllReduce(ctx, goccl.HostSlice(xs), goccl.HostSlice(xs), count, dt, goccl.Sum); err != nil {
					return err
				}
				for i, x := range xs {
					if want := float64(0*1000+i)/4 + float64(1*1000+i)/4; x != want {
						return fmt.Errorf("rank %d: element %d is %v, want %v", c.Rank(), i, x, want)
					}
				}
			}
			return nil
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d, count %d %s", r, count, dt)
		}
	}
	calls := func(algo string) uint64 { return comms[0].Stats().ByAlgo[algo].Calls }

	run(2, goccl.Float32)
	run(7, goccl.Float32)
	run(3, goccl.Float64) // 24 bytes: a size and an element size not seen before
	run(2, goccl.Float32)
	require.EqualValues(t, 4, calls("ring"))

	// Each spec's first call has the size of the call before the change.
	for _, spec := range []string{"tree", "rd", "naive", "ring"} {
		errs := runRanks(comms, func(c *goccl.Comm) error { return c.SetAlgo(spec) })
		for r, err := range errs {
			require.NoError(t, err, "rank %d: SetAlgo(%s)", r, spec)
		}
		before := calls(spec)
		run(2, goccl.Float32)
		run(0, goccl.Float32)
		run(2, goccl.Float32)
		require.Equal(t, before+3, calls(spec), "after SetAlgo(%q) the small calls must run %s", spec, spec)
	}
}

// Buffers the shortcut does not take (too short, partly overlapping) fail with the
// general path's error on the rank at fault, and on its peer too, without a timeout.
func TestSmallAllReduceBadBuffers(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		bufs       func() (send, recv []byte)
	}{
		{"short-send", "send buffer is 7 bytes, need 8", func() ([]byte, []byte) { return make([]byte, 7), make([]byte, 8) }},
		{"short-recv", "recv buffer is 4 bytes, need 8", func() ([]byte, []byte) { return make([]byte, 8), make([]byte, 4) }},
		{"overlap", "must be the same memory or disjoint", func() ([]byte, []byte) { b := make([]byte, 12); return b[:8], b[4:12] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := local(t, 2, goccl.WithAlgo("ring"), goccl.WithTimeout(20*time.Second))
			errs := runRanks(comms, func(c *goccl.Comm) error {
				send, recv := make([]byte, 8), make([]byte, 8)
				if c.Rank() == 1 {
					send, recv = tc.bufs()
				}
				return c.AllReduce(context.Background(), goccl.HostSlice(send), goccl.HostSlice(recv), 2, goccl.Float32, goccl.Sum)
			})
			require.ErrorIs(t, errs[1], goccl.ErrInvalid)
			require.Contains(t, errs[1].Error(), tc.want)
			require.Error(t, errs[0], "rank 0 must fail too")
			require.False(t, errors.Is(errs[0], goccl.ErrTimeout), "rank 0 timed out: %v", errs[0])
		})
	}
}

// In place on one rank and out of place on the other, at every small size up to the
// shortcut's limit and one past it: the same bits on both ranks, the serial sum.
func TestSmallAllReduceInPlaceAndApart(t *testing.T) {
	ctx := context.Background()
	comms := local(t, 2)
	for _, count := range []int{1, 2, 3, 31, 255, 256, 257} { // float32: 256 is 1 KiB
		errs := runRanks(comms, func(c *goccl.Comm) error {
			xs := make([]float32, count)
			for i := range xs {
				xs[i] = float32(i%13) + float32(c.Rank())/8
			}
			out := xs
			if c.Rank() == 0 {
				out = make([]float32, count)
			}
			if err := c.AllReduce(ctx, goccl.HostSlice(xs), goccl.HostSlice(out), count, goccl.Float32, goccl.Sum); err != nil {
				return err
			}
			for i, x := range out {
				if want := float32(float64(i%13)*2 + 1.0/8); x != want {
					return fmt.Errorf("rank %d count %d: element %d is %v, want %v", c.Rank(), count, i, x, want)
				}
			}
			return nil
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d count %d", r, count)
		}
	}
}
