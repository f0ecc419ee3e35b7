package rd

import (
	"context"
	"fmt"
	"math/bits"

	"golang.org/x/sync/errgroup"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// Name is the registry name.
const Name = "rd"

// DirectMax is the largest world that runs small messages as one direct exchange:
// 2(W-1) messages per rank in one step, against 2 log2 W in log2 W steps for recursive
// doubling. Above it the messages cost more than the steps they save. The cost model
// (algos.CostModel.Predict) follows the same rule.
const DirectMax = algos.RDDirectMax

// tagID is rd's algorithm id in message tags (algos.Tag): distinct from naive (1),
// ring (2) and tree (3), so a rank that runs another algorithm for the same call gets
// a mismatch instead of wrong data.
const tagID = algos.TagRD

// Tag phases.
const (
	phaseDirect   = iota + 1 // the one-step exchange
	phaseFoldIn              // an extra rank's input to its partner
	phaseStep                // recursive-doubling step (index = step << 16 | chunk)
	phaseFoldOut             // the result back to an extra rank
	phaseBarrier             // Barrier: the direct exchange (index 0), or a dissemination round (index = round)
	phasePairwise            // AllGather and ReduceScatter: a block to every rank (index = chunk)
	phaseHalve               // recursive halving: half the rank's range to its partner (index = step << 16 | chunk)
	phaseGather              // recursive doubling of the reduced blocks (index = step << 16 | chunk)
	phaseRSHalve             // ReduceScatter by recursive halving (index = step << 16 | chunk)
	phaseAGDouble            // AllGather by recursive doubling (index = step << 16 | chunk)
)

func tag(phase uint8, i int) uint32 { return algos.Tag(tagID, phase, i) }

func init() { algos.Register(Algorithm{}) }

// Algorithm is the direct-exchange / recursive-doubling / recursive-halving AllReduce,
// and the one-step (pairwise), recursive-doubling AllGather and recursive-halving
// ReduceScatter. The zero value is ready to use.
type Algorithm struct{}

// Name returns "rd".
func (Algorithm) Name() string { return Name }

// Supports reports AllReduce, Barrier, AllGather and ReduceScatter; the selector falls
// back (to ring) for the rest.
func (Algorithm) Supports(k transport.Kind) bool {
	return k == transport.KindAllReduce || k == transport.KindBarrier || k == transport.KindAllGather ||
		k == transport.KindReduceScatter
}

// ExchangeTag reports that a small AllReduce over at most DirectMax ranks is one direct
// exchange (algos.Exchanger).
func (Algorithm) ExchangeTag(n, world, chunk, eager int) (uint32, bool) {
	return tag(phaseDirect, 0), algos.RDDirect(n, world, chunk, eager)
}

// BarrierTag reports that the Barrier of two ranks is one exchange of empty messages
// (algos.BarrierExchanger).
func (Algorithm) BarrierTag(world int) (uint32, bool) { return tag(phaseBarrier, 0), world == 2 }

// Run executes a on this rank.
func (alg Algorithm) Run(ctx context.Context, p algos.Peers, a *algos.Args) error {
	if !alg.Supports(a.Kind) {
		return fmt.Errorf("rd: %w: %s (algos.Resolve falls back to ring)", transport.ErrNotSupported, a.Kind)
	}
	rank, w := p.Rank(), p.Size()
	if err := algos.Validate(a, rank, w); err != nil {
		return err
	}
	if w == 1 {
		return algos.RunLocal(a)
	}
	cs, eager := algos.ChunkSize(a, algos.DefaultChunkBytes), algos.EagerLimit(p)
	var err error
	if a.Kind == transport.KindBarrier {
		err = barrier(ctx, p)
	} else if a.Kind == transport.KindAllGather || a.Kind == transport.KindReduceScatter {
		err = pairwise(ctx, p, a, cs)
	} else if t, ok := alg.ExchangeTag(len(a.Send), w, cs, eager); ok {
		err = direct(ctx, p, a, t)
	} else if algos.RDHalves(len(a.Send), w, cs, eager) {
		err = halving(ctx, p, a, cs, eager)
	} else {
		err = doubling(ctx, p, a, cs, eager)
	}
	if err != nil {
		return fmt.Errorf("rd: %s: %w", a.Kind, err)
	}
	return nil
}

// barrier runs a Barrier. Up to DirectMax ranks it is one direct exchange of empty
// messages, as the small AllReduce's: every rank sends one to every other rank, then
// receives one from each. Above, it is the dissemination barrier: in round k every rank
// sends an empty message to rank+2^k and receives one from rank-2^k (mod W), for
// ceil(log2 W) rounds; after round k a rank has heard, directly or through the ranks
// before it, from the 2^(k+1)-1 ranks before it, so after the last from every rank.
// An empty message is always eager, so each send completes without its receiver and
// neither order can deadlock; and no link carries two of one call's messages (in the
// rounds, the distances 2^k differ modulo W). Both are one exchange at two ranks,
// where the tree's and naive's barriers send up and then down, two hops one after the
// other (2 ranks over shm: 1.0-1.1 us for the tree's, 0.65-0.71 for this one;
// BENCHMARKS.md, "Speed", 34d).
func barrier(ctx context.Context, p algos.Peers) error {
	rank, w := p.Rank(), p.Size()
	if w <= DirectMax {
		t := tag(phaseBarrier, 0)
		for k := 1; k < w; k++ { // rank+1 first, so not every rank writes to rank 0 first
			if err := algos.Send(ctx, p, (rank+k)%w, t, nil); err != nil {
				return err
			}
		}
		for k := 1; k < w; k++ {
			if err := algos.Recv(ctx, p, (rank-k+w)%w, t, nil); err != nil {
				return err
			}
		}
		return nil
	}
	for k, d := 0, 1; d < w; k, d = k+1, 2*d {
		if err := algos.Send(ctx, p, (rank+d)%w, tag(phaseBarrier, k), nil); err != nil {
			return err
		}
		if err := algos.Recv(ctx, p, (rank-d+w)%w, tag(phaseBarrier, k), nil); err != nil {
			return err
		}
	}
	return nil
}

// direct sends this rank's input to every other rank, then reduces the W inputs in
// rank order (the same order on every rank, hence the same bits). Every message is at
// most the links' eager size (algos.EagerLimit) and each link carries one per call, so
// all the sends complete without their receivers and the order cannot deadlock.
func direct(ctx context.Context, p algos.Peers, a *algos.Args, t uint32) error {
	if len(a.Send) <= algos.SmallExchangeMax { // the same messages, the inputs received whole
		return algos.SmallExchange(ctx, p, t, a)
	}
	rank, w := p.Rank(), p.Size()
	for k := 1; k < w; k++ { // rank+1 first, so not every rank writes to rank 0 first
		if err := algos.Send(ctx, p, (rank+k)%w, t, a.Send); err != nil {
			return err
		}
	}
	mine := a.Send
	if algos.SameMemory(a.Send, a.Recv) { // in place: Recv is about to be overwritten
		mine = algos.GetScratch(len(a.Send))
		defer algos.PutScratch(mine)
		copy(mine, a.Send)
	}
	for q := range w {
		var err error
		switch {
		case q == rank && q == 0:
			algos.CopyDistinct(a.Recv, mine)
		case q == rank:
			err = reduce.Apply3(a.DType, a.Op, a.Recv, a.Recv, mine)
		case q == 0:
			err = algos.Recv(ctx, p, q, t, a.Recv)
		default:
			err = algos.RecvReduce(ctx, p, q, t, a.DType, a.Op, a.Recv, a.Recv)
		}
		if err != nil {
			return err
		}
	}
	return reduce.Finish(a.DType, a.Op, a.Recv, w)
}

// pairwise runs an AllGather or ReduceScatter as one step: every rank sends each other
// rank the block that rank needs (AllGather: its own block; ReduceScatter: that rank's
// block of its input) and receives one block from each, stored in its place (AllGather)
// or reduced into its own block (ReduceScatter, in the order rank-1, rank-2, ...: fixed
// for each rank, and the block is reduced on that rank only). Every rank sends and
// receives (W-1)/W of the data, as in the ring, in one dependent hop instead of W-1.
// Where a block is small (algos.PairwiseOneStep: up to 16 KiB, one eager message) all
// the sends go first, then the receives, as the direct AllReduce does: one dependent
// hop. Larger blocks over a power-of-two world from 4 ranks go by recursive doubling or
// halving (gatherDoubling, scatterHalving: algos.PairwiseHalves); over other worlds
// step by step, a send to rank+k and a receive from rank-k at step k, which keeps what
// a rank receives in the caches of its cores: sent first, a 174 KiB block took twice
// the ring's time at 3 ranks on 2 cores ("Speed", 36d). Past one eager message a
// goroutine sends while this one receives, both in that order, so that at every step
// each link's sender and receiver work on the same block. At four ranks on two cores,
// up to 16 KiB blocks, the one step took 15.9-28.3 us for an AllGather and 18.5-26.6
// for a ReduceScatter, naive's two hops 17.1-37.8 and 23.0-44.1 ("Speed", 36d).
func pairwise(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank, w := p.Rank(), p.Size()
	ag := a.Kind == transport.KindAllGather
	n := len(a.Recv) // ReduceScatter's block
	if ag {
		n = len(a.Send)
	}
	out := func(to int) []byte { // the block for rank to
		if ag {
			return a.Send
		}
		return a.Send[to*n : (to+1)*n]
	}
	var src []byte // ReduceScatter accumulates in Recv, starting from its own block of Send
	if !ag {
		src = a.Send[rank*n : (rank+1)*n]
	}
	in := func(ctx context.Context, from int) error {
		if ag {
			return recvAll(ctx, p, from, phasePairwise, a.Recv[from*n:(from+1)*n], cs)
		}
		err := recvReduceAll(ctx, p, a, from, phasePairwise, 0, a.Recv, src, cs, nil)
		src = a.Recv
		return err
	}
	if ag {
		algos.CopyDistinct(a.Recv[rank*n:(rank+1)*n], a.Send)
	}
	if n == 0 { // nothing to move; the ranks still meet, as in every algorithm
		return barrier(ctx, p)
	}
	eager := algos.EagerLimit(p)
	switch {
	case algos.PairwiseHalves(n, w, cs, eager) && ag:
		return gatherDoubling(ctx, p, a, n, cs, eager)
	case algos.PairwiseHalves(n, w, cs, eager):
		return scatterHalving(ctx, p, a, cs, eager)
	case algos.PairwiseOneStep(n, cs, eager):
		for k := 1; k < w; k++ {
			to := (rank + k) % w
			if err := algos.Send(ctx, p, to, tag(phasePairwise, 0), out(to)); err != nil {
				return err
			}
		}
		for k := 1; k < w; k++ {
			if err := in(ctx, (rank-k+w)%w); err != nil {
				return err
			}
		}
	case algos.OneEagerMessage(p, n, cs):
		for k := 1; k < w; k++ {
			to := (rank + k) % w
			if err := algos.Send(ctx, p, to, tag(phasePairwise, 0), out(to)); err != nil {
				return err
			}
			if err := in(ctx, (rank-k+w)%w); err != nil {
				return err
			}
		}
	default:
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error {
			for k := 1; k < w; k++ {
				to := (rank + k) % w
				if err := sendAll(gctx, p, to, phasePairwise, 0, out(to), cs, nil); err != nil {
					return err
				}
			}
			return nil
		})
		g.Go(func() error {
			for k := 1; k < w; k++ {
				if err := in(gctx, (rank-k+w)%w); err != nil {
					return err
				}
			}
			return nil
		})
		if err := g.Wait(); err != nil {
			return err
		}
	}
	if ag {
		return nil
	}
	return reduce.Finish(a.DType, a.Op, a.Recv, w)
}

// gatherDoubling runs an AllGather of n-byte blocks by recursive doubling, over a
// power-of-two world (algos.PairwiseHalves): at step s a rank and its partner rank ^
// 2^s swap the 2^s blocks each has gathered so far, which lie side by side in Recv, so
// after log2 W steps every rank has all W. Every rank sends and receives (W-1)/W of the
// data, as in the ring, in log2 W dependent steps instead of W-1. Recv already holds
// the rank's own block.
func gatherDoubling(ctx context.Context, p algos.Peers, a *algos.Args, n, cs, eager int) error {
	rank, w := p.Rank(), p.Size()
	for s := 0; 1<<s < w; s++ {
		peer := rank ^ (1 << s)
		mine, theirs := rank&^(1<<s-1), peer&^(1<<s-1) // the first block of each side's run
		out, in := a.Recv[mine*n:(mine+1<<s)*n], a.Recv[theirs*n:(theirs+1<<s)*n]
		if err := swap(ctx, p, peer, phaseAGDouble, s, out, in, cs, eager, func(ctx context.Context) error {
			return recvAllAt(ctx, p, peer, phaseAGDouble, s<<16, in, cs)
		}); err != nil {
			return fmt.Errorf("doubling step %d: %w", s, err)
		}
	}
	return nil
}

// scatterHalving runs a ReduceScatter of n-byte blocks by recursive halving, over a
// power-of-two world (algos.PairwiseHalves): at step s, from the highest bit down, a
// rank sends its partner rank ^ 2^s the half of the blocks it still reduces that the
// partner keeps (the upper half goes to the rank with bit s set) and reduces the
// partner's copy of the half it keeps, so after log2 W steps it holds its own block
// reduced over every rank. Every rank sends and receives (W-1)/W of the data, as in the
// ring, in log2 W dependent steps instead of W-1. The first step reduces into a scratch
// half (the input stays as it is, and Recv may lie inside it), the ones between in
// place there, and the last into Recv.
func scatterHalving(ctx context.Context, p algos.Peers, a *algos.Args, cs, eager int) error {
	rank, w := p.Rank(), p.Size()
	scratch := algos.GetScratch(len(a.Send) / 2)
	defer algos.PutScratch(scratch)
	cur := a.Send // the blocks this rank still reduces
	for s := bits.Len(uint(w)) - 2; s >= 0; s-- {
		peer, half := rank^(1<<s), len(cur)/2
		keep, give := cur[:half], cur[half:]
		if rank&(1<<s) != 0 {
			keep, give = cur[half:], cur[:half]
		}
		dst := keep // in place in scratch
		switch {
		case s == 0:
			dst = a.Recv
		case len(cur) == len(a.Send):
			dst = scratch
		}
		if err := swap(ctx, p, peer, phaseRSHalve, s, give, keep, cs, eager, func(ctx context.Context) error {
			return recvReduceAll(ctx, p, a, peer, phaseRSHalve, s<<16, dst, keep, cs, nil)
		}); err != nil {
			return fmt.Errorf("halving step %d: %w", s, err)
		}
		cur = dst
	}
	return reduce.Finish(a.DType, a.Op, a.Recv, w)
}

// folded runs body on the largest power of two P <= W of the ranks. Rank r >= P hands
// its input to r-P first, gets the result back at the end and runs nothing else; a
// rank with such an extra rank reduces its input into Recv before body (extra) and
// sends it Recv after.
func folded(ctx context.Context, p algos.Peers, a *algos.Args, cs int, body func(pw int, extra bool) error) error {
	rank, w := p.Rank(), p.Size()
	pw := 1 << (bits.Len(uint(w)) - 1)
	if rank >= pw {
		if err := sendAll(ctx, p, rank-pw, phaseFoldIn, 0, a.Send, cs, nil); err != nil {
			return fmt.Errorf("fold in: %w", err)
		}
		if err := recvAll(ctx, p, rank-pw, phaseFoldOut, a.Recv, cs); err != nil {
			return fmt.Errorf("fold out: %w", err)
		}
		return nil
	}
	extra := rank+pw < w
	if extra {
		if err := recvReduceAll(ctx, p, a, rank+pw, phaseFoldIn, 0, a.Recv, a.Send, cs, nil); err != nil {
			return fmt.Errorf("fold in: %w", err)
		}
	}
	if err := body(pw, extra); err != nil {
		return err
	}
	if extra {
		if err := sendAll(ctx, p, rank+pw, phaseFoldOut, 0, a.Recv, cs, nil); err != nil {
			return fmt.Errorf("fold out: %w", err)
		}
	}
	return nil
}

// doubling is recursive doubling over the largest power of two P <= W (folded): the P
// ranks accumulate in Recv and, at step s, exchange it with r ^ 2^s.
func doubling(ctx context.Context, p algos.Peers, a *algos.Args, cs, eager int) error {
	rank, w := p.Rank(), p.Size()
	return folded(ctx, p, a, cs, func(pw int, extra bool) error {
		if !extra {
			algos.CopyDistinct(a.Recv, a.Send)
		}
		for s := 0; 1<<s < pw; s++ {
			if err := exchange(ctx, p, rank^(1<<s), s, a.Recv, a, cs, eager); err != nil {
				return fmt.Errorf("step %d: %w", s, err)
			}
		}
		return reduce.Finish(a.DType, a.Op, a.Recv, w)
	})
}

// halving is Rabenseifner's AllReduce over the largest power of two P <= W (folded):
// log2 P steps of recursive halving, in which a rank sends its partner (rank ^ 2^s at
// step s) the half of its range that the partner keeps and reduces the partner's copy
// of the half it keeps, leave every rank with its 1/P of the vector reduced; then
// log2 P steps of recursive doubling, in the reverse order, gather the blocks. Every
// rank sends and receives 2(P-1)/P of the vector, as in the ring, in 2 log2 P
// dependent steps instead of the ring's 2(W-1), where doubling moves log2 P whole
// vectors; each block is reduced on one rank and copied to the others, so every rank
// ends with the same bits.
func halving(ctx context.Context, p algos.Peers, a *algos.Args, cs, eager int) error {
	rank, w := p.Rank(), p.Size()
	return folded(ctx, p, a, cs, func(pw int, extra bool) error {
		src := a.Send // the step's operand: Send, until Recv holds the rank's part
		if extra {
			src = a.Recv
		}
		esz := a.DType.Size()
		lo, hi := 0, a.Count // the range of elements this rank reduces
		steps := bits.Len(uint(pw)) - 1
		parents := make([][2]int, steps)
		for s := range steps {
			peer := rank ^ (1 << s)
			mid := lo + (hi-lo)/2
			keepLo, keepHi, giveLo, giveHi := lo, mid, mid, hi
			if rank&(1<<s) != 0 {
				keepLo, keepHi, giveLo, giveHi = mid, hi, lo, mid
			}
			parents[s] = [2]int{lo, hi}
			give, keep := src[giveLo*esz:giveHi*esz], a.Recv[keepLo*esz:keepHi*esz]
			if err := swap(ctx, p, peer, phaseHalve, s, give, keep, cs, eager, func(ctx context.Context) error {
				return recvReduceAll(ctx, p, a, peer, phaseHalve, s<<16, keep, src[keepLo*esz:keepHi*esz], cs, nil)
			}); err != nil {
				return fmt.Errorf("halving step %d: %w", s, err)
			}
			lo, hi, src = keepLo, keepHi, a.Recv
		}
		if err := reduce.Finish(a.DType, a.Op, a.Recv[lo*esz:hi*esz], w); err != nil {
			return err
		}
		for s := steps - 1; s >= 0; s-- {
			peer, plo, phi := rank^(1<<s), parents[s][0], parents[s][1]
			theirLo, theirHi := hi, phi // the partner holds the other half of the parent range
			if lo != plo {
				theirLo, theirHi = plo, lo
			}
			mine, theirs := a.Recv[lo*esz:hi*esz], a.Recv[theirLo*esz:theirHi*esz]
			if err := swap(ctx, p, peer, phaseGather, s, mine, theirs, cs, eager, func(ctx context.Context) error {
				return recvAllAt(ctx, p, peer, phaseGather, s<<16, theirs, cs)
			}); err != nil {
				return fmt.Errorf("gather step %d: %w", s, err)
			}
			lo, hi = plo, phi
		}
		return nil
	})
}

// swap sends out to peer (tags phase, step << 16 | chunk) while recv receives the
// peer's message of its size: the send first when both fit one eager message each,
// else both at once. out and what recv writes do not overlap.
func swap(ctx context.Context, p algos.Peers, peer int, phase uint8, step int, out, in []byte, cs, eager int, recv func(context.Context) error) error {
	if len(out) <= cs && len(out) <= eager && len(in) <= cs && len(in) <= eager {
		if err := sendAll(ctx, p, peer, phase, step<<16, out, cs, nil); err != nil {
			return err
		}
		return recv(ctx)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sendAll(gctx, p, peer, phase, step<<16, out, cs, nil) })
	g.Go(func() error { return recv(gctx) })
	return g.Wait()
}

// exchange swaps acc with peer and leaves acc op theirs in acc. A small acc goes in
// one eager message, sent before the receive; a large one is sent chunk by chunk while
// the peer's chunks are reduced in, each chunk only after it went out. Where a chunk is
// larger than the links' eager size its send completes only once the peer receives it,
// while the peer's reduce waits for its own send: so there each chunk is received into
// a scratch chunk first, and reduced in once this rank's chunk went out (exchangeWide).
func exchange(ctx context.Context, p algos.Peers, peer, step int, acc []byte, a *algos.Args, cs, eager int) error {
	if len(acc) <= cs && len(acc) <= eager {
		if err := algos.Send(ctx, p, peer, tag(phaseStep, step<<16), acc); err != nil {
			return err
		}
		return algos.RecvReduce(ctx, p, peer, tag(phaseStep, step<<16), a.DType, a.Op, acc, acc)
	}
	var sent algos.Progress
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sendAll(gctx, p, peer, phaseStep, step<<16, acc, cs, &sent) })
	if cs > eager {
		g.Go(func() error { return exchangeWide(gctx, p, a, peer, step<<16, acc, cs, &sent) })
	} else {
		g.Go(func() error { return recvReduceAll(gctx, p, a, peer, phaseStep, step<<16, acc, acc, cs, &sent) })
	}
	return g.Wait()
}

// exchangeWide receives peer's chunks tagged base+i into a scratch chunk, and reduces
// chunk i into acc once sent says it went out. The receive does not wait for this
// rank's send, so the peer's send of a chunk larger than one eager message, which
// waits for this receive, completes, and so does this rank's, which waits for the
// peer's: two ranks that each waited for their own send first would wait for each other
// (rd at 2 ranks over shm with a 64 KiB ring, or over tcp with tcp.bufsize=64K, hung
// until the timeout).
func exchangeWide(ctx context.Context, p algos.Peers, a *algos.Args, peer, base int, acc []byte, cs int, sent *algos.Progress) error {
	tmp := algos.GetScratch(min(cs, len(acc)))
	defer algos.PutScratch(tmp)
	for i := range algos.NumChunks(len(acc), cs) {
		lo, hi := algos.Chunk(len(acc), cs, i)
		in := tmp[:hi-lo]
		if err := algos.Recv(ctx, p, peer, tag(phaseStep, base+i), in); err != nil {
			return err
		}
		if err := sent.Wait(ctx, i+1); err != nil {
			return err
		}
		if err := reduce.Apply3(a.DType, a.Op, acc[lo:hi], acc[lo:hi], in); err != nil {
			return err
		}
	}
	return nil
}

// sendAll sends buf to peer in chunks tagged base+i, advancing sent after each.
func sendAll(ctx context.Context, p algos.Peers, peer int, phase uint8, base int, buf []byte, cs int, sent *algos.Progress) error {
	for i := range algos.NumChunks(len(buf), cs) {
		lo, hi := algos.Chunk(len(buf), cs, i)
		if err := algos.Send(ctx, p, peer, tag(phase, base+i), buf[lo:hi]); err != nil {
			return err
		}
		if sent != nil {
			sent.Advance()
		}
	}
	return nil
}

func recvAll(ctx context.Context, p algos.Peers, peer int, phase uint8, buf []byte, cs int) error {
	return recvAllAt(ctx, p, peer, phase, 0, buf, cs)
}

// recvAllAt receives peer's chunks tagged base+i into buf.
func recvAllAt(ctx context.Context, p algos.Peers, peer int, phase uint8, base int, buf []byte, cs int) error {
	for i := range algos.NumChunks(len(buf), cs) {
		lo, hi := algos.Chunk(len(buf), cs, i)
		if err := algos.Recv(ctx, p, peer, tag(phase, base+i), buf[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

// recvReduceAll receives peer's chunks tagged base+i into dst = src op incoming; with
// wait, chunk i first waits until chunk i of dst has been sent.
func recvReduceAll(ctx context.Context, p algos.Peers, a *algos.Args, peer int, phase uint8, base int, dst, src []byte, cs int, wait *algos.Progress) error {
	for i := range algos.NumChunks(len(dst), cs) {
		if wait != nil {
			if err := wait.Wait(ctx, i+1); err != nil {
				return err
			}
		}
		lo, hi := algos.Chunk(len(dst), cs, i)
		if err := algos.RecvReduce(ctx, p, peer, tag(phase, base+i), a.DType, a.Op, dst[lo:hi], src[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}
