package ring_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/ring"
	"github.com/goccl/goccl/transport"
)

func TestMatrix(t *testing.T) {
	algostest.Matrix(t, ring.Algorithm{}, algostest.Options{Large: true})
}

func TestFailures(t *testing.T) {
	a := ring.Algorithm{}
	algostest.CheckFailures(t, a.Name(), a.Run, a.Supports)
}

// TestErrorSaysWhere checks a link failure comes back wrapped with the algorithm, the
// collective, the step and the peer, and as a peer error.
func TestErrorSaysWhere(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := algostest.NewMesh(ctx, 3)
	require.NoError(t, err)
	defer m.Close()
	args := make([]*algos.Args, 3)
	for r := range args {
		args[r] = &algos.Args{Kind: transport.KindAllReduce, DType: transport.Float32, Count: 30,
			Send: make([]byte, 120), Recv: make([]byte, 120)}
	}
	errs := m.Run(ctx, args, func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		if p.Rank() == 0 {
			return errors.New("rank 0 died")
		}
		return ring.Algorithm{}.Run(ctx, p, a)
	})
	// Rank 1 receives from rank 0, which is gone.
	require.ErrorIs(t, errs[1], transport.ErrPeer)
	require.Regexp(t, `^ring: allreduce: step \d+ chunk 0: recv 40 bytes from rank 0 \(tag 0x21`, errs[1].Error())
}
