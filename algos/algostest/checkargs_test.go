package algostest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	_ "github.com/goccl/goccl/algos/hier"
	_ "github.com/goccl/goccl/algos/naive"
	_ "github.com/goccl/goccl/algos/rd"
	_ "github.com/goccl/goccl/algos/ring"
	_ "github.com/goccl/goccl/algos/tree"
	"github.com/goccl/goccl/transport"
)

// vouching wraps Peers and says that exactly one Args was validated by its caller.
type vouching struct {
	algos.Peers
	vouched *algos.Args
}

func (v vouching) Prevalidated(a *algos.Args) bool { return a == v.vouched }

// Built-in algorithms skip their own validation only when Peers vouches for that very
// Args (the communicator's); run directly, or with a Peers that vouches for another
// Args, they still reject bad input, on every rank and without sending anything.
func TestAlgorithmsValidateUnlessVouchedFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range []string{"ring", "tree", "rd", "naive", "hier"} {
		alg, err := algos.Lookup(name)
		require.NoError(t, err)
		for _, peers := range []string{"plain", "vouching for another Args"} {
			t.Run(name+"/"+peers, func(t *testing.T) {
				m, err := algostest.NewMesh(ctx, 2)
				require.NoError(t, err)
				defer m.Close()
				args := make([]*algos.Args, 2)
				for r := range args {
					// 5 float32 need 20 bytes; send has 12.
					args[r] = &algos.Args{Kind: transport.KindAllReduce, Send: make([]byte, 12), Recv: make([]byte, 20),
						Count: 5, DType: transport.Float32, Op: transport.Sum}
				}
				other := &algos.Args{}
				errs := m.Run(ctx, args, func(ctx context.Context, p algos.Peers, a *algos.Args) error {
					if peers != "plain" {
						p = vouching{Peers: p, vouched: other}
					}
					return alg.Run(ctx, p, a)
				})
				for r, err := range errs {
					require.ErrorIs(t, err, transport.ErrInvalid, "rank %d", r)
					require.ErrorContains(t, err, "send buffer is 12 bytes, need 20", "rank %d", r)
				}
			})
		}
	}
}

// CheckArgs trusts a Peers that vouches for the Args (the communicator has just run
// Validate on it) and validates everything else.
func TestCheckArgs(t *testing.T) {
	bad := &algos.Args{Kind: transport.KindAllReduce, Count: 3, DType: transport.Float32}
	ctx := context.Background()
	m, err := algostest.NewMesh(ctx, 1)
	require.NoError(t, err)
	defer m.Close()
	m.Run(ctx, []*algos.Args{bad}, func(_ context.Context, p algos.Peers, a *algos.Args) error {
		require.ErrorIs(t, algos.CheckArgs(p, a), transport.ErrInvalid)
		require.ErrorIs(t, algos.CheckArgs(vouching{Peers: p, vouched: &algos.Args{}}, a), transport.ErrInvalid)
		require.NoError(t, algos.CheckArgs(vouching{Peers: p, vouched: a}, a))
		return nil
	})
}
