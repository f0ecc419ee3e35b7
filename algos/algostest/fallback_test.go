package algostest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	_ "github.com/goccl/goccl/algos/naive"
	_ "github.com/goccl/goccl/algos/ring"
	_ "github.com/goccl/goccl/algos/tree"
	"github.com/goccl/goccl/transport"
)

// TestEveryCollectiveThroughEverySpec runs every collective through the selector for
// each algorithm name and auto: what an algorithm does not implement must arrive at
// one that does (tree -> ring -> naive) and still give the reference's answer.
func TestEveryCollectiveThroughEverySpec(t *testing.T) {
	for _, spec := range []string{"naive", "ring", "tree", "auto", "allreduce:tree<64,ring;broadcast:naive"} {
		sp, err := algos.ParseSpec(spec)
		require.NoError(t, err)
		run := func(ctx context.Context, p algos.Peers, a *algos.Args) error {
			alg, _, err := sp.Resolve(a.Kind, algos.Bytes(a.Kind, a.Count, a.DType, p.Size()), p.Size(), algos.TCPModel)
			if err != nil {
				return err
			}
			return alg.Run(ctx, p, a)
		}
		algostest.MatrixFunc(t, spec, run, func(transport.Kind) bool { return true }, algostest.Options{
			Worlds: []int{1, 3, 4},
			Counts: []int{0, 7, 13},
			DTypes: []transport.DType{transport.Int32, transport.BFloat16, transport.Float64},
		})
	}
}
