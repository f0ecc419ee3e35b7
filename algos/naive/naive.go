package naive

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// Name is the registry name.
const Name = "naive"

func init() { algos.Register(Algorithm{}) }

// Algorithm is the naive (root-centred) algorithm. The zero value is ready to use.
type Algorithm struct{}

// Name returns "naive".
func (Algorithm) Name() string { return Name }

// Supports reports true for every collective.
func (Algorithm) Supports(k transport.Kind) bool {
	switch k {
	case transport.KindAllReduce, transport.KindReduce, transport.KindBroadcast, transport.KindAllGather,
		transport.KindReduceScatter, transport.KindGather, transport.KindScatter, transport.KindAllToAll,
		transport.KindBarrier, transport.KindSendRecv:
		return true
	}
	return false
}

// Message phases inside one operation (the tag's phase field).
const (
	phaseUp   = 1 // towards the root
	phaseDown = 2 // from the root
	phaseP2P  = 3 // AllToAll and SendRecv
)

// PairTag reports that two ranks run an AllToAll of n-byte blocks as one exchange, and a
// Gather or Scatter as one message to the root or from it (algos.PairExchanger): one
// message each when a block is one chunk.
func (Algorithm) PairTag(kind transport.Kind, n, chunk, eager int) (uint32, bool) {
	ok := n > 0 && n <= chunk
	switch kind {
	case transport.KindAllToAll:
		return tag(phaseP2P, 0), ok
	case transport.KindGather:
		return tag(phaseUp, 0), ok
	case transport.KindScatter:
		return tag(phaseDown, 0), ok
	}
	return 0, false
}

// naiveBlockMax is the largest AllToAll block sent as one message (allToAll).
const naiveBlockMax = 1 << 20

func tag(phase uint8, i int) uint32 { return algos.Tag(algos.TagNaive, phase, i) }

// Run executes a on this rank.
func (Algorithm) Run(ctx context.Context, p algos.Peers, a *algos.Args) error {
	rank, w := p.Rank(), p.Size()
	if err := algos.Validate(a, rank, w); err != nil {
		return err
	}
	if w == 1 {
		return algos.RunLocal(a)
	}
	cs := algos.ChunkSize(a, algos.DefaultChunkBytes)
	var err error
	switch a.Kind {
	case transport.KindAllReduce:
		err = reduceAt(ctx, p, a, 0, true, cs)
	case transport.KindReduce:
		err = reduceAt(ctx, p, a, a.Root, false, cs)
	case transport.KindBroadcast:
		err = broadcast(ctx, p, a, cs)
	case transport.KindAllGather:
		err = allGather(ctx, p, a, cs)
	case transport.KindReduceScatter:
		err = reduceScatter(ctx, p, a, cs)
	case transport.KindGather:
		err = gather(ctx, p, a, cs)
	case transport.KindScatter:
		err = scatter(ctx, p, a, cs)
	case transport.KindAllToAll:
		err = allToAll(ctx, p, a, cs)
	case transport.KindBarrier:
		err = barrier(ctx, p)
	case transport.KindSendRecv:
		err = sendRecv(ctx, p, a, cs)
	}
	if err != nil {
		return fmt.Errorf("naive: %s: %w", a.Kind, err)
	}
	return nil
}

// sendChunks sends buf to peer in chunks, advancing sent (if non-nil) after each.
func sendChunks(ctx context.Context, p algos.Peers, peer int, phase uint8, buf []byte, cs int, sent *algos.Progress) error {
	for i := range algos.NumChunks(len(buf), cs) {
		lo, hi := algos.Chunk(len(buf), cs, i)
		if err := algos.Send(ctx, p, peer, tag(phase, i), buf[lo:hi]); err != nil {
			return err
		}
		if sent != nil {
			sent.Advance()
		}
	}
	return nil
}

// recvChunks receives buf from peer in chunks; chunk i first waits for wait >= i+1 when
// wait is non-nil (so an in-place buffer is not overwritten before its send went out).
func recvChunks(ctx context.Context, p algos.Peers, peer int, phase uint8, buf []byte, cs int, wait *algos.Progress) error {
	for i := range algos.NumChunks(len(buf), cs) {
		if wait != nil {
			if err := wait.Wait(ctx, i+1); err != nil {
				return err
			}
		}
		lo, hi := algos.Chunk(len(buf), cs, i)
		if err := algos.Recv(ctx, p, peer, tag(phase, i), buf[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

// reduceAt reduces every rank's Send into dst at root, chunk by chunk in rank order,
// and with bcast sends each finished chunk back to every rank's Recv.
func reduceAt(ctx context.Context, p algos.Peers, a *algos.Args, root int, bcast bool, cs int) error {
	rank, w := p.Rank(), p.Size()
	if algos.OneEagerMessage(p, len(a.Send), cs) {
		return reduceAtSerial(ctx, p, a, root, bcast)
	}
	g, ctx := errgroup.WithContext(ctx)
	if rank != root {
		var sent algos.Progress
		g.Go(func() error { return sendChunks(ctx, p, root, phaseUp, a.Send, cs, &sent) })
		if bcast {
			g.Go(func() error { return recvChunks(ctx, p, root, phaseDown, a.Recv, cs, &sent) })
		}
		return g.Wait()
	}
	var done algos.Progress
	dst := a.Recv
	g.Go(func() error {
		for i := range algos.NumChunks(len(dst), cs) {
			lo, hi := algos.Chunk(len(dst), cs, i)
			src := a.Send[lo:hi]
			for peer := range w {
				if peer == root {
					continue
				}
				if err := algos.RecvReduce(ctx, p, peer, tag(phaseUp, i), a.DType, a.Op, dst[lo:hi], src); err != nil {
					return err
				}
				src = dst[lo:hi]
			}
			if err := reduce.Finish(a.DType, a.Op, dst[lo:hi], w); err != nil {
				return err
			}
			done.Advance()
		}
		return nil
	})
	if bcast {
		for peer := range w {
			if peer == root {
				continue
			}
			g.Go(func() error {
				for i := range algos.NumChunks(len(dst), cs) {
					if err := done.Wait(ctx, i+1); err != nil {
						return err
					}
					lo, hi := algos.Chunk(len(dst), cs, i)
					if err := algos.Send(ctx, p, peer, tag(phaseDown, i), dst[lo:hi]); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// reduceAtSerial is reduceAt for one small chunk, in the calling goroutine: the
// messages are the same, but without a goroutine per peer, whose hand-offs would cost
// more than the messages (see BENCHMARKS.md, "Speed"). Sends of at most algos.EagerBytes do not
// wait for the receiver, so the order cannot deadlock.
func reduceAtSerial(ctx context.Context, p algos.Peers, a *algos.Args, root int, bcast bool) error {
	rank, w := p.Rank(), p.Size()
	if rank != root {
		if err := algos.Send(ctx, p, root, tag(phaseUp, 0), a.Send); err != nil {
			return err
		}
		if !bcast {
			return nil
		}
		return algos.Recv(ctx, p, root, tag(phaseDown, 0), a.Recv)
	}
	src := a.Send
	for peer := range w {
		if peer == root {
			continue
		}
		if err := algos.RecvReduce(ctx, p, peer, tag(phaseUp, 0), a.DType, a.Op, a.Recv, src); err != nil {
			return err
		}
		src = a.Recv
	}
	if err := reduce.Finish(a.DType, a.Op, a.Recv, w); err != nil {
		return err
	}
	if !bcast {
		return nil
	}
	for peer := range w {
		if peer != root {
			if err := algos.Send(ctx, p, peer, tag(phaseDown, 0), a.Recv); err != nil {
				return err
			}
		}
	}
	return nil
}

// toAll runs f once for every other rank, given that peer: one after another on the
// calling goroutine when each moves at most n bytes, in one piece that fits the links'
// eager size, else on one goroutine per peer. Such a send never waits for its receive,
// so serving the peers in turn cannot deadlock, and the goroutines would cost more than
// the messages (at 3 ranks a small Broadcast took 5.6 us through them against the
// tree's 0.7: BENCHMARKS.md, "Speed", 21).
func toAll(ctx context.Context, p algos.Peers, n, cs int, f func(ctx context.Context, peer int) error) error {
	if algos.OneEagerMessage(p, n, cs) {
		for peer := range p.Size() {
			if peer != p.Rank() {
				if err := f(ctx, peer); err != nil {
					return err
				}
			}
		}
		return nil
	}
	g, ctx := errgroup.WithContext(ctx)
	for peer := range p.Size() {
		if peer != p.Rank() {
			g.Go(func() error { return f(ctx, peer) })
		}
	}
	return g.Wait()
}

func broadcast(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	if p.Rank() != a.Root {
		return recvChunks(ctx, p, a.Root, phaseDown, a.Recv, cs, nil)
	}
	algos.CopyDistinct(a.Recv, a.Send)
	return toAll(ctx, p, len(a.Send), cs, func(ctx context.Context, peer int) error {
		return sendChunks(ctx, p, peer, phaseDown, a.Send, cs, nil)
	})
}

// allGather collects every block at rank 0, then sends the whole buffer to everyone.
func allGather(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank, n := p.Rank(), len(a.Send)
	if rank != 0 {
		if err := sendChunks(ctx, p, 0, phaseUp, a.Send, cs, nil); err != nil {
			return err
		}
		return recvChunks(ctx, p, 0, phaseDown, a.Recv, cs, nil)
	}
	algos.CopyDistinct(a.Recv[:n], a.Send)
	if err := toAll(ctx, p, n, cs, func(ctx context.Context, peer int) error {
		return recvChunks(ctx, p, peer, phaseUp, a.Recv[peer*n:(peer+1)*n], cs, nil)
	}); err != nil {
		return err
	}
	return toAll(ctx, p, len(a.Recv), cs, func(ctx context.Context, peer int) error {
		return sendChunks(ctx, p, peer, phaseDown, a.Recv, cs, nil)
	})
}

// reduceScatter reduces every rank's whole input at rank 0 and sends each rank its block.
func reduceScatter(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank, w, n := p.Rank(), p.Size(), len(a.Recv)
	if rank != 0 {
		if err := sendChunks(ctx, p, 0, phaseUp, a.Send, cs, nil); err != nil {
			return err
		}
		return recvChunks(ctx, p, 0, phaseDown, a.Recv, cs, nil)
	}
	acc := algos.GetScratch(len(a.Send))
	defer algos.PutScratch(acc)
	for i := range algos.NumChunks(len(acc), cs) {
		lo, hi := algos.Chunk(len(acc), cs, i)
		src := a.Send[lo:hi]
		for peer := 1; peer < w; peer++ {
			if err := algos.RecvReduce(ctx, p, peer, tag(phaseUp, i), a.DType, a.Op, acc[lo:hi], src); err != nil {
				return err
			}
			src = acc[lo:hi]
		}
	}
	if err := reduce.Finish(a.DType, a.Op, acc, w); err != nil {
		return err
	}
	copy(a.Recv, acc[:n])
	return toAll(ctx, p, n, cs, func(ctx context.Context, peer int) error {
		return sendChunks(ctx, p, peer, phaseDown, acc[peer*n:(peer+1)*n], cs, nil)
	})
}

func gather(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank, n := p.Rank(), len(a.Send)
	if rank != a.Root {
		return sendChunks(ctx, p, a.Root, phaseUp, a.Send, cs, nil)
	}
	algos.CopyDistinct(a.Recv[rank*n:(rank+1)*n], a.Send)
	return toAll(ctx, p, n, cs, func(ctx context.Context, peer int) error {
		return recvChunks(ctx, p, peer, phaseUp, a.Recv[peer*n:(peer+1)*n], cs, nil)
	})
}

func scatter(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank, n := p.Rank(), len(a.Recv)
	if rank != a.Root {
		return recvChunks(ctx, p, a.Root, phaseDown, a.Recv, cs, nil)
	}
	algos.CopyDistinct(a.Recv, a.Send[rank*n:(rank+1)*n])
	return toAll(ctx, p, n, cs, func(ctx context.Context, peer int) error {
		return sendChunks(ctx, p, peer, phaseDown, a.Send[peer*n:(peer+1)*n], cs, nil)
	})
}

// allToAll exchanges blocks pairwise: at step k, send to rank+k and receive from rank-k,
// so every rank talks to one sender and one receiver at a time. In-place, the W-1 blocks
// for the peers are saved first, as received blocks overwrite them; the rank's own block
// stays where it is.
func allToAll(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank, w := p.Rank(), p.Size()
	n := len(a.Send) / w
	// A block of up to 1 MiB goes as one message: a copy has nothing to pipeline, and
	// the links cut large messages themselves. In 512 KiB chunks, 1 MiB blocks at 4
	// ranks over shm took 2.3-2.5 ms a call, whole 1.5-1.7; larger blocks gained
	// nothing from larger pieces (BENCHMARKS.md, "Speed", 40c).
	cs = max(cs, min(n, naiveBlockMax))
	src, own := a.Send, a.Send[rank*n:(rank+1)*n]
	if algos.SameMemory(a.Send, a.Recv) {
		src = algos.GetScratch(len(a.Send))
		defer algos.PutScratch(src)
		copy(src[:rank*n], a.Send[:rank*n])
		copy(src[(rank+1)*n:], a.Send[(rank+1)*n:])
	}
	algos.CopyDistinct(a.Recv[rank*n:(rank+1)*n], own)
	if algos.OneEagerMessage(p, n, cs) {
		// Every send fits the links without a receive beside it, so all of them go
		// first and the call waits for one hop, not W-1 in a row (a send to rank+k, then
		// a receive from rank-k: at 3 ranks on 2 cores 14 us against vader's 7.4).
		for k := 1; k < w; k++ {
			to := (rank + k) % w
			if err := sendChunks(ctx, p, to, phaseP2P, src[to*n:(to+1)*n], cs, nil); err != nil {
				return err
			}
		}
		for k := 1; k < w; k++ {
			from := (rank - k + w) % w
			if err := recvChunks(ctx, p, from, phaseP2P, a.Recv[from*n:(from+1)*n], cs, nil); err != nil {
				return err
			}
		}
		return nil
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		for k := 1; k < w; k++ {
			peer := (rank + k) % w
			if err := sendChunks(ctx, p, peer, phaseP2P, src[peer*n:(peer+1)*n], cs, nil); err != nil {
				return err
			}
		}
		return nil
	})
	g.Go(func() error {
		for k := 1; k < w; k++ {
			peer := (rank - k + w) % w
			if err := recvChunks(ctx, p, peer, phaseP2P, a.Recv[peer*n:(peer+1)*n], cs, nil); err != nil {
				return err
			}
		}
		return nil
	})
	return g.Wait()
}

// barrier: every rank checks in with rank 0, which answers once all have.
func barrier(ctx context.Context, p algos.Peers) error {
	if p.Rank() != 0 {
		if err := algos.Send(ctx, p, 0, tag(phaseUp, 0), nil); err != nil {
			return err
		}
		return algos.Recv(ctx, p, 0, tag(phaseDown, 0), nil)
	}
	for peer := 1; peer < p.Size(); peer++ {
		if err := algos.Recv(ctx, p, peer, tag(phaseUp, 0), nil); err != nil {
			return err
		}
	}
	return toAll(ctx, p, 0, 1, func(ctx context.Context, peer int) error {
		return algos.Send(ctx, p, peer, tag(phaseDown, 0), nil)
	})
}

func sendRecv(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank := p.Rank()
	if a.SendPeer == rank {
		algos.CopyDistinct(a.Recv, a.Send)
		return nil
	}
	g, ctx := errgroup.WithContext(ctx)
	if a.SendPeer >= 0 {
		g.Go(func() error { return sendChunks(ctx, p, a.SendPeer, phaseP2P, a.Send, cs, nil) })
	}
	if a.RecvPeer >= 0 {
		g.Go(func() error { return recvChunks(ctx, p, a.RecvPeer, phaseP2P, a.Recv, cs, nil) })
	}
	return g.Wait()
}
