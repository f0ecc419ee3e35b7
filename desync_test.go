package goccl_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/transport"
)

// Rank 2 calls Broadcast where the others call AllReduce. Under naive, no message can
// show it: the root waits for rank 2's input while rank 2 waits for the root's
// broadcast. The watchdogs compare what the ranks published and fail every rank with a
// mismatch that names both operations, long before the (minute-long) timeout.
func TestDesyncFoundWithoutMessages(t *testing.T) {
	const world, odd = 3, 2
	comms := local(t, world, goccl.WithAlgo("naive"), goccl.WithTimeout(time.Minute))
	ctx := context.Background()
	errs := runRanks(comms, func(c *goccl.Comm) error {
		xs := make([]float32, 1000)
		b := goccl.HostSlice(xs)
		if c.Rank() == odd {
			return c.Broadcast(ctx, b, b, len(xs), goccl.Float32, 0)
		}
		return c.AllReduce(ctx, b, b, len(xs), goccl.Float32, goccl.Sum)
	})
	described := false
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.False(t, errors.Is(err, transport.ErrTimeout), "rank %d timed out instead: %v", r, err)
		require.True(t, errors.Is(err, transport.ErrMismatch) || strings.Contains(err.Error(), "rank 2"), "rank %d: %v", r, err)
		described = described || (strings.Contains(err.Error(), "allreduce float32 sum count=1000") &&
			strings.Contains(err.Error(), "broadcast float32 count=1000 root=0"))
	}
	require.True(t, described, "no error names both operations: %v", errs)
}
