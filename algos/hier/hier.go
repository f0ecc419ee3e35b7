package hier

import (
	"context"
	"fmt"
	"slices"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/algos/ring"
	"github.com/goccl/goccl/algos/tree"
	"github.com/goccl/goccl/transport"
)

// Name is the registry name.
const Name = "hier"

func init() { algos.Register(Algorithm{}) }

// Algorithm is the hierarchical algorithm. The zero value is ready to use.
type Algorithm struct {
	// Intra and Inter price the host-local links and the links between hosts when the
	// algorithm picks ring or tree for each phase. The zero values mean algos.ShmModel
	// and algos.TCPModel; every rank must use the same models, or two ranks of a phase
	// could pick different algorithms (and fail with a mismatch).
	Intra, Inter algos.CostModel
}

// Name returns "hier".
func (Algorithm) Name() string { return Name }

// Supports reports the collectives hier runs natively.
func (Algorithm) Supports(k transport.Kind) bool {
	switch k {
	case transport.KindAllReduce, transport.KindReduce, transport.KindBroadcast:
		return true
	}
	return false
}

// Run executes a on this rank.
func (alg Algorithm) Run(ctx context.Context, p algos.Peers, a *algos.Args) error {
	rank, w := p.Rank(), p.Size()
	if err := algos.Validate(a, rank, w); err != nil {
		return err
	}
	if !alg.Supports(a.Kind) {
		return fmt.Errorf("hier: %w: %s (algos.Resolve falls back to ring)", transport.ErrNotSupported, a.Kind)
	}
	if w == 1 {
		return algos.RunLocal(a)
	}
	root := a.Root
	if a.Kind == transport.KindAllReduce {
		root = -1
	}
	pl, err := newPlan(p, root)
	if err != nil {
		return fmt.Errorf("hier: %w", err)
	}
	pl.intra, pl.inter = alg.models(a.ChunkBytes)
	switch a.Kind {
	case transport.KindAllReduce:
		err = pl.allReduce(ctx, a)
	case transport.KindReduce:
		err = pl.reduce(ctx, a)
	case transport.KindBroadcast:
		err = pl.broadcast(ctx, a)
	}
	if err != nil {
		return fmt.Errorf("hier: %s: %w", a.Kind, err)
	}
	return nil
}

// models returns the phase models with the call's chunk size, which the ring and tree
// phases use and which changes their predicted fill.
func (alg Algorithm) models(chunk int) (intra, inter algos.CostModel) {
	intra, inter = alg.Intra, alg.Inter
	if intra == (algos.CostModel{}) {
		intra = algos.ShmModel
	}
	if inter == (algos.CostModel{}) {
		inter = algos.TCPModel
	}
	intra.ChunkBytes, inter.ChunkBytes = chunk, chunk
	return intra, inter
}

// plan is one rank's part in a hierarchical call: its host's group, and the leaders'
// group when it leads its host.
type plan struct {
	local        *algos.Group // the ranks of this rank's host
	localLeader  int          // the leader's rank in local
	leaders      *algos.Group // one leader per host, in host order; nil off the leaders
	rootHost     int          // the root's host, as a rank of leaders (0 without a root)
	world        int
	intra, inter algos.CostModel
}

// newPlan partitions p by host (algos.HostsOf) and names a leader per host: the root
// for its own host (root >= 0), the lowest rank for the others.
func newPlan(p algos.Peers, root int) (*plan, error) {
	hosts := algos.HostsOf(p)
	leaders := make([]int, len(hosts))
	pl := &plan{world: p.Size()}
	mine := -1
	for h, ranks := range hosts {
		leaders[h] = ranks[0]
		if slices.Contains(ranks, root) {
			leaders[h], pl.rootHost = root, h
		}
		if slices.Contains(ranks, p.Rank()) {
			mine = h
		}
	}
	var err error
	if pl.local, err = algos.NewGroup(p, hosts[mine]); err != nil {
		return nil, err
	}
	pl.localLeader = slices.Index(hosts[mine], leaders[mine])
	if p.Rank() == leaders[mine] {
		if pl.leaders, err = algos.NewGroup(p, leaders); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// isLeader reports whether this rank leads its host.
func (pl *plan) isLeader() bool { return pl.leaders != nil }

// phase runs one collective on g with the algorithm m predicts is faster there.
func phase(ctx context.Context, what string, g *algos.Group, m algos.CostModel, a *algos.Args) error {
	var alg algos.Algorithm = ring.Algorithm{}
	if algos.PhaseAlgo(m, a.Kind, a.Count*a.DType.Size(), g.Size()) == tree.Name {
		alg = tree.Algorithm{}
	}
	if err := alg.Run(ctx, g, a); err != nil {
		// The inner algorithm numbers ranks within the group; say how that maps.
		members := make([]int, g.Size())
		for i := range members {
			members[i] = g.Member(i)
		}
		return fmt.Errorf("%s (%s over world ranks %v, numbered 0..%d below): %w", what, alg.Name(), members, g.Size()-1, err)
	}
	return nil
}

// sumOp is the op the phases use: Avg sums, and the rank holding the total divides by
// the world size once (each phase would divide by its own group's size).
func sumOp(op transport.Op) transport.Op {
	if op == transport.Avg {
		return transport.Sum
	}
	return op
}

func (pl *plan) allReduce(ctx context.Context, a *algos.Args) error {
	op := sumOp(a.Op)
	sub := func(kind transport.Kind, send []byte, root int) *algos.Args {
		return &algos.Args{Kind: kind, Send: send, Recv: a.Recv, Count: a.Count, DType: a.DType, Op: op,
			Root: root, ChunkBytes: a.ChunkBytes}
	}
	if err := phase(ctx, "reduce inside the host", pl.local, pl.intra, sub(transport.KindReduce, a.Send, pl.localLeader)); err != nil {
		return err
	}
	if pl.isLeader() {
		if err := phase(ctx, "allreduce across hosts", pl.leaders, pl.inter, sub(transport.KindAllReduce, a.Recv, 0)); err != nil {
			return err
		}
		if err := reduce.Finish(a.DType, a.Op, a.Recv, pl.world); err != nil {
			return err
		}
	}
	return phase(ctx, "broadcast inside the host", pl.local, pl.intra, sub(transport.KindBroadcast, a.Recv, pl.localLeader))
}

func (pl *plan) reduce(ctx context.Context, a *algos.Args) error {
	op := sumOp(a.Op)
	partial := a.Recv // the root's result buffer; other leaders accumulate in scratch
	if pl.isLeader() && partial == nil {
		partial = algos.GetScratch(len(a.Send))
		defer algos.PutScratch(partial)
	}
	in := &algos.Args{Kind: transport.KindReduce, Send: a.Send, Recv: partial, Count: a.Count, DType: a.DType, Op: op,
		Root: pl.localLeader, ChunkBytes: a.ChunkBytes}
	if err := phase(ctx, "reduce inside the host", pl.local, pl.intra, in); err != nil {
		return err
	}
	if !pl.isLeader() {
		return nil
	}
	across := &algos.Args{Kind: transport.KindReduce, Send: partial, Recv: a.Recv, Count: a.Count, DType: a.DType, Op: op,
		Root: pl.rootHost, ChunkBytes: a.ChunkBytes}
	if err := phase(ctx, "reduce across hosts", pl.leaders, pl.inter, across); err != nil {
		return err
	}
	if a.Recv != nil { // the root
		return reduce.Finish(a.DType, a.Op, a.Recv, pl.world)
	}
	return nil
}

func (pl *plan) broadcast(ctx context.Context, a *algos.Args) error {
	if pl.isLeader() {
		across := &algos.Args{Kind: transport.KindBroadcast, Send: a.Send, Recv: a.Recv, Count: a.Count, DType: a.DType,
			Root: pl.rootHost, ChunkBytes: a.ChunkBytes}
		if err := phase(ctx, "broadcast across hosts", pl.leaders, pl.inter, across); err != nil {
			return err
		}
	}
	// Every leader (the root included) now holds the data in Recv.
	var send []byte
	if pl.isLeader() {
		send = a.Recv
	}
	in := &algos.Args{Kind: transport.KindBroadcast, Send: send, Recv: a.Recv, Count: a.Count, DType: a.DType,
		Root: pl.localLeader, ChunkBytes: a.ChunkBytes}
	return phase(ctx, "broadcast inside the host", pl.local, pl.intra, in)
}
