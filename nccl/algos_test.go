package nccl

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/naive"
	"github.com/goccl/goccl/algos/rd"
	"github.com/goccl/goccl/algos/ring"
	"github.com/goccl/goccl/algos/tree"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// TestAlgorithmsOverLinks runs goccl's own algorithms over NCCL point-to-point links
// (the fakes), as `--transport nccl --algo ring` does: the small exchange and recursive
// doubling send before they receive on both ranks, which deadlocked while each link
// direction's communicator was created only when first used. Values are checked
// against the serial float64 reference, for sizes 0, 1, odd and not divisible by the
// world.
func TestAlgorithmsOverLinks(t *testing.T) {
	p, _ := useFakes(t, false)
	for _, w := range []int{2, 3} {
		conns := transporttest.Mesh(t, Transport{}, w, transporttest.Options{Params: p, Timeout: 20 * time.Second})
		m := algostest.MeshOf(conns)
		for _, alg := range []algos.Algorithm{ring.Algorithm{}, rd.Algorithm{}, tree.Algorithm{}, naive.Algorithm{}} {
			for _, kind := range []transport.Kind{transport.KindAllReduce, transport.KindBroadcast, transport.KindAllGather, transport.KindReduceScatter} {
				if !alg.Supports(kind) {
					continue
				}
				for _, count := range []int{0, 1, 7, 1001} {
					c := algostest.Case{Kind: kind, DType: transport.Float32, Op: transport.Sum, Count: count, Seed: uint64(w*10000 + count)}
					t.Run(fmt.Sprintf("w=%d/%s/%s", w, alg.Name(), c), func(t *testing.T) {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						defer cancel()
						require.NoError(t, c.Check(ctx, m, alg.Run))
					})
				}
			}
		}
	}
}
