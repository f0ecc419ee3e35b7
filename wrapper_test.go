package goccl_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/ring"
	"github.com/goccl/goccl/transport"
)

// growingWrapper is a third party's algorithm around the ring that changes the Args it
// was given before it hands them on with the communicator's Peers: here it asks for more
// elements than the buffers hold, as a buggy splitter would.
type growingWrapper struct{}

func (growingWrapper) Name() string                   { return "test-growing-wrapper" }
func (growingWrapper) Supports(k transport.Kind) bool { return k == transport.KindAllReduce }
func (growingWrapper) Run(ctx context.Context, p algos.Peers, a *algos.Args) error {
	a.Count *= 4
	return ring.Algorithm{}.Run(ctx, p, a)
}

func init() { algos.Register(growingWrapper{}) }

// The communicator validates the Args before it runs the algorithm, and every built-in
// algorithm validates what it is handed again: Args that a wrapper changed in between
// are refused by the ring on every rank instead of being read past the buffers. (Trusting
// the communicator's check instead saved about 110 of 3300 instructions per small call,
// and making that trust safe against such a wrapper cost as much again: BENCHMARKS.md,
// "Speed", 10.)
func TestChangedArgsAreValidatedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comms, err := goccl.InitLocal(ctx, 2)
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	for _, c := range comms {
		require.NoError(t, c.SetAlgo("test-growing-wrapper"))
	}
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs := make([]float32, 8)
			errs[r] = c.AllReduce(ctx, goccl.HostSlice(xs), goccl.HostSlice(xs), len(xs), goccl.Float32, goccl.Sum)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.ErrorIs(t, err, transport.ErrInvalid, "rank %d", r)
		require.ErrorContains(t, err, "send buffer is 32 bytes, need 128", "rank %d", r)
	}
}
