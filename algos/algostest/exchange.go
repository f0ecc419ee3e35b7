package algostest

import (
	"context"
	"fmt"
	"testing"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// ExchangeRun is a RunFunc for an algorithm that implements algos.Exchanger: the ranks
// for which mine reports true do what the communicator does for a small blocking
// AllReduce (Validate, ExchangeTag, algos.Exchange on their own scratch), the others run
// alg.Run; both must produce the same messages and results. A call that ExchangeTag
// does not accept runs alg.Run on every rank.
func ExchangeRun(alg algos.Algorithm, mine func(rank int) bool) RunFunc {
	x, ok := alg.(algos.Exchanger)
	return func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		if !ok || a.Kind != transport.KindAllReduce || !mine(p.Rank()) {
			return alg.Run(ctx, p, a)
		}
		if err := algos.Validate(a, p.Rank(), p.Size()); err != nil {
			return err
		}
		t, ok := x.ExchangeTag(len(a.Send), p.Size(), algos.ChunkSize(a, algos.DefaultChunkBytes), algos.EagerLimit(p))
		if !ok {
			return alg.Run(ctx, p, a)
		}
		return algos.Exchange(ctx, p, t, a.DType, a.Op, a.Send, a.Recv, make([]byte, p.Size()*len(a.Send)))
	}
}

// ExchangeMatrix checks alg's direct exchange run by algos.Exchange on some ranks and by
// alg.Run on the others (ExchangeRun), both ways round, over every dtype and op, in
// place and not, for the small counts where the communicator takes that path.
func ExchangeMatrix(t *testing.T, alg algos.Algorithm, worlds []int) {
	x, ok := alg.(algos.Exchanger)
	if !ok {
		t.Fatalf("%s does not implement algos.Exchanger", alg.Name())
	}
	for _, w := range worlds {
		if _, ok := x.ExchangeTag(8, w, algos.DefaultChunkBytes, algos.EagerBytes); !ok {
			t.Fatalf("%s: world %d: ExchangeTag refuses an 8-byte AllReduce", alg.Name(), w)
		}
	}
	counts := []int{0, 1, 7, 13, algos.SmallExchangeMax / 8}
	for _, even := range []bool{true, false} {
		name := fmt.Sprintf("%s/exchange-on-even-ranks=%v", alg.Name(), even)
		run := ExchangeRun(alg, func(r int) bool { return (r%2 == 0) == even })
		MatrixFunc(t, name, run, func(k transport.Kind) bool { return k == transport.KindAllReduce },
			Options{Worlds: worlds, Counts: counts})
	}
}
