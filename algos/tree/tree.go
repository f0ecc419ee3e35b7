package tree

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/internal/shape"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// Name is the registry name.
const Name = "tree"

func init() { algos.Register(Algorithm{}) }

// Algorithm is the tree algorithm. The zero value is ready to use.
type Algorithm struct{}

// Name returns "tree".
func (Algorithm) Name() string { return Name }

// Supports reports the collectives the trees run natively.
func (Algorithm) Supports(k transport.Kind) bool {
	switch k {
	case transport.KindAllReduce, transport.KindReduce, transport.KindBroadcast, transport.KindBarrier:
		return true
	}
	return false
}

// Tag phases.
const (
	phaseAllReduce = iota + 1
	phaseReduce
	phaseBroadcast
	phaseBarrierUp
	phaseBarrierDown
)

func tag(phase uint8, i int) uint32 { return algos.Tag(algos.TagTree, phase, i) }

// Run executes a on this rank.
func (alg Algorithm) Run(ctx context.Context, p algos.Peers, a *algos.Args) error {
	rank, w := p.Rank(), p.Size()
	if err := algos.Validate(a, rank, w); err != nil {
		return err
	}
	if !alg.Supports(a.Kind) {
		return fmt.Errorf("tree: %w: %s (algos.Resolve falls back to ring or naive)", transport.ErrNotSupported, a.Kind)
	}
	if w == 1 {
		return algos.RunLocal(a)
	}
	cs := algos.ChunkSize(a, algos.DefaultChunkBytes)
	var err error
	switch a.Kind {
	case transport.KindAllReduce:
		err = allReduce(ctx, p, a, cs)
	case transport.KindReduce:
		err = reduceTo(ctx, p, a, cs)
	case transport.KindBroadcast:
		err = broadcast(ctx, p, a, cs)
	case transport.KindBarrier:
		err = barrier(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("tree: %s: %w", a.Kind, err)
	}
	return nil
}

// reduceTo reduces up the binomial tree rooted at a.Root. Children are served smallest
// subtree first (they finish first); each child's receiver goroutine adds its chunk i
// after the previous child's, so the order of operations is fixed. Interior ranks
// accumulate in scratch (Recv is only valid at the root) and the sender forwards a chunk
// once the last child's part is in.
func reduceTo(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank, w := p.Rank(), p.Size()
	node := shape.Binomial(w, a.Root, rank)
	kids := slices.Clone(node.Children)
	slices.Reverse(kids)
	n := len(a.Send)
	if len(kids) == 0 {
		return sendAll(ctx, p, node.Parent, phaseReduce, a.Send, cs, nil)
	}
	acc := a.Recv
	if rank != a.Root {
		acc = algos.GetScratch(n)
		defer algos.PutScratch(acc)
	}
	if algos.OneEagerMessage(p, n, cs) {
		// One chunk: serve the children in order, then pass the sum on, in this
		// goroutine (small reduces are latency; see serialOps).
		for ci, child := range kids {
			src := a.Send
			if ci > 0 {
				src = acc
			}
			if err := algos.RecvReduce(ctx, p, child, tag(phaseReduce, 0), a.DType, a.Op, acc, src); err != nil {
				return err
			}
		}
		if rank == a.Root {
			return reduce.Finish(a.DType, a.Op, acc, w)
		}
		return sendAll(ctx, p, node.Parent, phaseReduce, acc, cs, nil)
	}
	done := make([]algos.Progress, len(kids))
	g, ctx := errgroup.WithContext(ctx)
	for ci, child := range kids {
		g.Go(func() error {
			for i := range algos.NumChunks(n, cs) {
				lo, hi := algos.Chunk(n, cs, i)
				src := a.Send[lo:hi]
				if ci > 0 {
					if err := done[ci-1].Wait(ctx, i+1); err != nil {
						return err
					}
					src = acc[lo:hi]
				}
				if err := algos.RecvReduce(ctx, p, child, tag(phaseReduce, i), a.DType, a.Op, acc[lo:hi], src); err != nil {
					return err
				}
				if ci == len(kids)-1 && rank == a.Root {
					if err := reduce.Finish(a.DType, a.Op, acc[lo:hi], w); err != nil {
						return err
					}
				}
				done[ci].Advance()
			}
			return nil
		})
	}
	if rank != a.Root {
		g.Go(func() error { return sendAll(ctx, p, node.Parent, phaseReduce, acc, cs, &done[len(kids)-1]) })
	}
	return g.Wait()
}

// broadcast sends down the binomial tree rooted at a.Root, one sender goroutine per
// child, each forwarding chunk i as soon as it has arrived.
func broadcast(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank, w := p.Rank(), p.Size()
	node := shape.Binomial(w, a.Root, rank)
	if algos.OneEagerMessage(p, len(a.Recv), cs) {
		// One chunk: receive it, then forward it to each child, in this goroutine.
		src := a.Send
		if rank == a.Root {
			algos.CopyDistinct(a.Recv, a.Send)
		} else {
			if err := algos.Recv(ctx, p, node.Parent, tag(phaseBroadcast, 0), a.Recv); err != nil {
				return err
			}
			src = a.Recv
		}
		for _, child := range node.Children {
			if err := sendAll(ctx, p, child, phaseBroadcast, src, cs, nil); err != nil {
				return err
			}
		}
		return nil
	}
	var got *algos.Progress
	src := a.Send
	g, ctx := errgroup.WithContext(ctx)
	if rank == a.Root {
		algos.CopyDistinct(a.Recv, a.Send)
	} else {
		got, src = new(algos.Progress), a.Recv
		g.Go(func() error {
			for i := range algos.NumChunks(len(a.Recv), cs) {
				lo, hi := algos.Chunk(len(a.Recv), cs, i)
				if err := algos.Recv(ctx, p, node.Parent, tag(phaseBroadcast, i), a.Recv[lo:hi]); err != nil {
					return err
				}
				got.Advance()
			}
			return nil
		})
	}
	for _, child := range node.Children {
		g.Go(func() error { return sendAll(ctx, p, child, phaseBroadcast, src, cs, got) })
	}
	return g.Wait()
}

// sendAll sends buf to peer in chunks; with ready, chunk i waits until ready >= i+1.
func sendAll(ctx context.Context, p algos.Peers, peer int, phase uint8, buf []byte, cs int, ready *algos.Progress) error {
	for i := range algos.NumChunks(len(buf), cs) {
		if ready != nil {
			if err := ready.Wait(ctx, i+1); err != nil {
				return err
			}
		}
		lo, hi := algos.Chunk(len(buf), cs, i)
		if err := algos.Send(ctx, p, peer, tag(phase, i), buf[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

// barrier: empty messages up the binomial tree of rank 0, then down it. A rank leaves
// only after the root heard from every rank's subtree, so after every rank entered.
func barrier(ctx context.Context, p algos.Peers) error {
	node := shape.Binomial(p.Size(), 0, p.Rank())
	for _, c := range node.Children {
		if err := algos.Recv(ctx, p, c, tag(phaseBarrierUp, 0), nil); err != nil {
			return err
		}
	}
	if node.Parent >= 0 {
		if err := algos.Send(ctx, p, node.Parent, tag(phaseBarrierUp, 0), nil); err != nil {
			return err
		}
		if err := algos.Recv(ctx, p, node.Parent, tag(phaseBarrierDown, 0), nil); err != nil {
			return err
		}
	}
	for _, c := range node.Children {
		if err := algos.Send(ctx, p, c, tag(phaseBarrierDown, 0), nil); err != nil {
			return err
		}
	}
	return nil
}
