package algos

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// SmallExchangeMax is the largest input (bytes per rank) for which an algorithm runs its
// direct exchange through Exchange: receiving a copy of every input and reducing the
// copies costs nothing next to a message at these sizes, and saves the pooled
// per-message reducer that streaming needs. Larger exchanges reduce the pieces as they
// land (RecvReduce).
const SmallExchangeMax = 1 << 10

// Exchanger is an optional Algorithm ability: the algorithm says for which AllReduce
// calls it sends nothing but one direct exchange (every rank sends its whole input to
// every other rank under one tag, then reduces the W inputs in rank order, or for two
// ranks in either order, which gives the same bits), and under which tag. A caller that
// has the inputs at hand (the communicator, for a small blocking call) may then run
// Exchange itself with those very messages, without building Args for the algorithm:
// the ranks that do and the ranks that run the algorithm interoperate.
type Exchanger interface {
	// ExchangeTag reports whether an AllReduce of n bytes per rank over world ranks,
	// with pipelining unit chunk and eager size eager (EagerLimit), is one direct
	// exchange, and its tag.
	ExchangeTag(n, world, chunk, eager int) (tag uint32, ok bool)
}

// BarrierExchanger is an optional Algorithm ability: the algorithm says whether its
// Barrier over world ranks is one exchange of empty messages under one tag (every rank
// sends one to every other rank, then receives one from each), and under which tag. A
// caller may then run that exchange itself, and ranks that do interoperate with ranks
// that run the algorithm.
type BarrierExchanger interface {
	BarrierTag(world int) (tag uint32, ok bool)
}

// PairExchanger is an optional Algorithm ability for two ranks: the algorithm says for
// which AllGather, ReduceScatter or AllToAll calls it sends nothing but one message of n
// bytes (one block: the call's count elements) to the other rank and receives one from
// it, and for which Broadcast, Scatter, Gather or Reduce calls one rank sends one such
// message and the other receives it, under one tag, and which tag. The messages, per
// kind:
//
//   - AllGather: the rank sends its Send; the peer's lands in the peer's block of Recv,
//     and the own block is a copy of Send.
//   - ReduceScatter: the rank sends the peer's block of Send; its Recv is its own block
//     of Send op the peer's message, in that order (then Finish for avg, over 2 ranks).
//   - AllToAll: the rank sends the peer's block of Send; the peer's lands in the peer's
//     block of Recv, and the own block is a copy of the own block of Send.
//   - Broadcast: the root sends its Send, and its Recv is a copy of it; the other rank
//     receives it into Recv.
//   - Scatter: the root sends the peer's block of Send, and its Recv is a copy of its
//     own block; the other rank receives into Recv.
//   - Gather: the other rank sends its Send; the root receives it into the peer's block
//     of Recv, and its own block is a copy of its Send.
//   - Reduce: the other rank sends its Send; the root's Recv is its Send op the message,
//     in that order (then Finish for avg, over 2 ranks).
//
// A caller with the buffers at hand (the communicator, for a small blocking call) may
// then exchange those very messages itself, and interoperate with a peer that runs the
// algorithm.
type PairExchanger interface {
	// PairTag reports whether kind between two ranks, with blocks of n bytes,
	// pipelining unit chunk and eager size eager (EagerLimit), is that one exchange,
	// and its tag.
	PairTag(kind transport.Kind, n, chunk, eager int) (tag uint32, ok bool)
}

// Exchange runs an AllReduce as one direct exchange under tag: it sends send to every
// other rank (rank+1 first, so not every rank writes to rank 0 first), receives every
// other rank's input into its slot of in, and reduces the W inputs in rank order into
// recv, the same order and so the same bits on every rank. send and recv are the same
// length and either the same memory or apart (Validate); in holds Size()*len(send)
// bytes. Every message must be at most the links' eager size (EagerLimit): the sends
// then complete before any receive, and the order cannot deadlock.
func Exchange(ctx context.Context, p Peers, tag uint32, dt transport.DType, op transport.Op, send, recv, in []byte) error {
	rank, w, n := p.Rank(), p.Size(), len(send)
	if len(recv) != n || len(in) < w*n {
		return fmt.Errorf("algos: %w: exchange of %d bytes into %d bytes with %d bytes of scratch (need %d)",
			transport.ErrInvalid, n, len(recv), len(in), w*n)
	}
	h := p.Header(tag)
	for q := rank + 1; ; q++ { // rank+1, rank+2, ... mod w (no division: tens of cycles at these sizes)
		if q == w {
			q = 0
		}
		if q == rank {
			break
		}
		if err := p.Link(q).Send(ctx, h, send); err != nil {
			return fmt.Errorf("send %d bytes to rank %d (tag %#x): %w", n, q, tag, err)
		}
	}
	for q := rank - 1; ; q-- { // rank-1 first: the rank that sent to this one first
		if q < 0 {
			q = w - 1
		}
		if q == rank {
			break
		}
		if err := p.Link(q).Recv(ctx, h, in[q*n:q*n+n:q*n+n]); err != nil {
			return fmt.Errorf("recv %d bytes from rank %d (tag %#x): %w", n, q, tag, err)
		}
	}
	// recv = x0 op x1 op ... in rank order, where x_rank is send and the others are
	// their slots of in. Apply3 may write its first operand in place, so recv takes the
	// first step directly (no copy of x0 into it first); in place, a rank other than 0
	// first keeps its input in its own slot, since that step overwrites it.
	x := func(q int) []byte {
		if q == rank {
			return send
		}
		return in[q*n : q*n+n : q*n+n]
	}
	if w == 1 {
		CopyDistinct(recv, send)
	}
	if rank > 1 && SameMemory(send, recv) {
		mine := in[rank*n : rank*n+n : rank*n+n]
		copy(mine, send)
		send = mine
	}
	for q := 1; q < w; q++ {
		a := recv
		if q == 1 {
			a = x(0)
		}
		if err := reduce.Apply3(dt, op, recv, a, x(q)); err != nil {
			return err
		}
	}
	if op != transport.Avg {
		return nil
	}
	return reduce.Finish(dt, op, recv, w)
}

// SmallExchange is Exchange with pooled scratch, for algorithms.
func SmallExchange(ctx context.Context, p Peers, tag uint32, a *Args) error {
	in := GetScratch(p.Size() * len(a.Send))
	defer PutScratch(in)
	return Exchange(ctx, p, tag, a.DType, a.Op, a.Send, a.Recv, in)
}
