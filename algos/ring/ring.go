package ring

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// Name is the registry name.
const Name = "ring"

func init() { algos.Register(Algorithm{}) }

// Algorithm is the ring algorithm. The zero value is ready to use.
type Algorithm struct{}

// Name returns "ring".
func (Algorithm) Name() string { return Name }

// Supports reports the collectives the ring runs natively.
func (Algorithm) Supports(k transport.Kind) bool {
	switch k {
	case transport.KindAllReduce, transport.KindReduceScatter, transport.KindAllGather,
		transport.KindBroadcast, transport.KindReduce:
		return true
	}
	return false
}

// ExchangeTag reports that two ranks run a small AllReduce (at most the eager size, one
// chunk and algos.RingExchangeMax) as one exchange (algos.Exchanger).
func (Algorithm) ExchangeTag(n, world, chunk, eager int) (uint32, bool) {
	return algos.Tag(algos.TagRing, phaseAllReduce, 0), algos.RingExchange(n, world, chunk, eager)
}

// PairTag reports that two ranks run an AllGather or ReduceScatter of n-byte blocks as
// one exchange, and a Broadcast or Reduce of n bytes as one message from the root or to
// it (algos.PairExchanger): the ring's one step, one message while it fits the eager
// size (serialOK).
func (Algorithm) PairTag(kind transport.Kind, n, chunk, eager int) (uint32, bool) {
	ok := n > 0 && n <= eager
	switch kind {
	case transport.KindAllGather:
		return algos.Tag(algos.TagRing, phaseAllGather, 0), ok
	case transport.KindReduceScatter:
		return algos.Tag(algos.TagRing, phaseReduceScatter, 0), ok
	case transport.KindBroadcast:
		return algos.Tag(algos.TagRing, phaseBroadcast, 0), ok
	case transport.KindReduce:
		return algos.Tag(algos.TagRing, phaseReduce, 0), ok
	}
	return 0, false
}

// Tag phases, one per collective shape.
const (
	phaseAllReduce = iota + 1
	phaseReduceScatter
	phaseAllGather
	phaseBroadcast
	phaseReduce
)

// Run executes a on this rank.
func (alg Algorithm) Run(ctx context.Context, p algos.Peers, a *algos.Args) error {
	rank, w := p.Rank(), p.Size()
	if err := algos.Validate(a, rank, w); err != nil {
		return err
	}
	if !alg.Supports(a.Kind) {
		return fmt.Errorf("ring: %w: %s (algos.Resolve falls back to naive)", transport.ErrNotSupported, a.Kind)
	}
	if w == 1 {
		return algos.RunLocal(a)
	}
	if a.Kind == transport.KindAllReduce {
		if t, ok := alg.ExchangeTag(len(a.Send), w, algos.ChunkSize(a, algos.DefaultChunkBytes), algos.EagerLimit(p)); ok {
			if err := exchange(ctx, p, a, t, 1-rank); err != nil { // the pipe is not needed (nor allocated)
				return fmt.Errorf("ring: %s: %w", a.Kind, err)
			}
			return nil
		}
	}
	pp := &pipe{p: p, a: a, next: (rank + 1) % w, prev: (rank - 1 + w) % w, cs: algos.ChunkSize(a, algos.DefaultChunkBytes),
		eager: algos.EagerLimit(p)}
	var err error
	switch a.Kind {
	case transport.KindAllReduce:
		pp.phase = phaseAllReduce
		err = allReduce(ctx, pp)
	case transport.KindReduceScatter:
		pp.phase = phaseReduceScatter
		err = reduceScatter(ctx, pp)
	case transport.KindAllGather:
		pp.phase = phaseAllGather
		err = allGather(ctx, pp)
	case transport.KindBroadcast:
		pp.phase = phaseBroadcast
		err = broadcast(ctx, pp)
	case transport.KindReduce:
		pp.phase = phaseReduce
		err = reduceChain(ctx, pp)
	}
	if err != nil {
		return fmt.Errorf("ring: %s: %w", a.Kind, err)
	}
	return nil
}

// segment returns the byte range of segment i when count elements split into w nearly
// equal segments (the first count%w get one element more).
func segment(count, esz, w, i int) (lo, hi int) {
	base, rem := count/w, count%w
	start := i*base + min(i, rem)
	n := base
	if i < rem {
		n++
	}
	return start * esz, (start + n) * esz
}

func mod(x, w int) int { return ((x % w) + w) % w }

// allReduce: reduce-scatter steps s = 0..W-2 send segment r-s and reduce segment r-s-1
// (from Send into Recv, so no copy is needed out-of-place); after them segment r+1 is
// complete and finished. All-gather steps s = 0..W-2 then send segment r+1-s and store
// segment r-s. A step's send is the segment the previous step received: the token.
// The last all-gather step's segments are read by no later step: from coldBytes of
// output it receives them with algos.RecvCold, and the last reduce-scatter step, whose
// segment the all-gather then sends, reduces into Recv with algos.RecvReduceCold (its
// lines are not read before they are written; not for an average, whose Finish reads
// the chunk back at once): over tcp at 2 ranks about 4 % less time at 64 MiB, the same
// within the noise at 3 and 4 ranks over shm and tcp (BENCHMARKS.md, "Speed", 37a).
// Two ranks with such an output run allReduce2 when interleaves says so, and so do two
// ranks with a float32 sum of any size that interleaves (fusable); each runs
// allReduce2's fused form (fused2) where its link and CPU allow (fusedLink). The order
// of the messages is decided alike on both ranks (sizes, dtype and op), the fused form
// locally.
func allReduce(ctx context.Context, pp *pipe) error {
	a, r, w := pp.a, pp.p.Rank(), pp.p.Size()
	esz := a.DType.Size()
	seg := func(i int) (lo, hi int) { return segment(a.Count, esz, w, mod(i, w)) }
	cold := len(a.Recv) >= coldBytes
	if interleaves(pp) && (cold || fusable(a)) {
		if res := fusedLink(pp); res != nil {
			return fused2(ctx, pp, res, seg, cold)
		}
		return allReduce2(ctx, pp, seg, cold)
	}
	st := getSteps(2 * (w - 1))
	defer st.put()
	for s := 0; s < w-1; s++ {
		lo, hi := seg(r - s)
		src := a.Recv[lo:hi]
		if s == 0 {
			src = a.Send[lo:hi]
		}
		st.sends = append(st.sends, xfer{buf: src, wait: s > 0})
		lo, hi = seg(r - s - 1)
		st.recvs = append(st.recvs, xfer{buf: a.Recv[lo:hi], a: a.Send[lo:hi], finish: s == w-2, signal: true,
			cold: cold && s == w-2})
	}
	for s := 0; s < w-1; s++ {
		lo, hi := seg(r + 1 - s)
		st.sends = append(st.sends, xfer{buf: a.Recv[lo:hi], wait: true})
		lo, hi = seg(r - s)
		st.recvs = append(st.recvs, xfer{buf: a.Recv[lo:hi], signal: s < w-2, cold: cold && s == w-2})
	}
	return pp.runSteps(ctx, st)
}

// exchange is a small AllReduce of two ranks in one step instead of the ring's two
// (tag t, ExchangeTag's):
// each rank sends its whole input and adds the other's to it. The wire carries the same
// bytes as the ring (n each way instead of n/2 twice) and the latency halves, which is
// all that matters at these sizes. Both ranks compute a op b with the operands swapped;
// every op is commutative bit for bit (IEEE addition and multiplication, Go's max and
// min including NaN and signed zeros, float16 and bfloat16 through float32, integers
// modulo 2^n), so both get the same bits; the one exception is which payload a NaN
// carries when both operands are NaNs, which no collective library promises.
func exchange(ctx context.Context, p algos.Peers, a *algos.Args, t uint32, peer int) error {
	if len(a.Send) <= algos.SmallExchangeMax {
		if err := algos.SmallExchange(ctx, p, t, a); err != nil {
			return fmt.Errorf("exchange: %w", err)
		}
		return nil
	}
	if err := algos.Send(ctx, p, peer, t, a.Send); err != nil {
		return fmt.Errorf("exchange: %w", err)
	}
	if err := algos.RecvReduce(ctx, p, peer, t, a.DType, a.Op, a.Recv, a.Send); err != nil {
		return fmt.Errorf("exchange: %w", err)
	}
	return reduce.Finish(a.DType, a.Op, a.Recv, 2)
}

// reduceScatter: block b of Send belongs to rank b. Step s sends block r-s-1 and
// reduces block r-s-2, so the last step (s = W-2) lands rank r's own block, straight
// into Recv. Partial sums in between alternate between two scratch blocks; the receiver
// reuses one only after the sender has sent what it held (the reverse token).
func reduceScatter(ctx context.Context, pp *pipe) error {
	a, r, w := pp.a, pp.p.Rank(), pp.p.Size()
	n := len(a.Recv)
	cold := n >= coldBytes // the last step's sums are the call's output: past the caches
	blk := func(b int) []byte { b = mod(b, w); return a.Send[b*n : (b+1)*n] }
	var scratch [2][]byte
	for i := range min(2, w-2) {
		scratch[i] = algos.GetScratch(n)
		defer algos.PutScratch(scratch[i])
	}
	st := getSteps(w - 1)
	defer st.put()
	for s := 0; s < w-1; s++ {
		last := s == w-2
		dst := a.Recv
		if !last {
			dst = scratch[s%2]
		}
		st.recvs = append(st.recvs, xfer{buf: dst, a: blk(r - s - 2), finish: last, signal: !last, wait: s >= 2,
			cold: last && cold})
		src := blk(r - 1)
		if s > 0 {
			src = scratch[(s-1)%2]
		}
		// Signal after step s's sends when the receiver's step s+1 waits to reuse them.
		st.sends = append(st.sends, xfer{buf: src, wait: s > 0, signal: s+1 <= w-2 && s+1 >= 2})
	}
	return pp.runSteps(ctx, st)
}

// allGather: step s sends block r-s (its own block first, straight from Send) and stores
// block r-s-1; the own block is copied into Recv alongside.
func allGather(ctx context.Context, pp *pipe) error {
	a, r, w := pp.a, pp.p.Rank(), pp.p.Size()
	n := len(a.Send)
	cold := len(a.Recv) >= coldBytes // the last step's block is forwarded by no one: past the caches
	blk := func(b int) []byte { b = mod(b, w); return a.Recv[b*n : (b+1)*n] }
	algos.CopyDistinct(blk(r), a.Send)
	st := getSteps(w - 1)
	defer st.put()
	for s := 0; s < w-1; s++ {
		src := blk(r - s)
		if s == 0 {
			src = a.Send
		}
		st.sends = append(st.sends, xfer{buf: src, wait: s > 0})
		st.recvs = append(st.recvs, xfer{buf: blk(r - s - 1), signal: s < w-2, cold: cold && s == w-2})
	}
	return pp.runSteps(ctx, st)
}

// broadcast is a chain from the root around the ring: each rank stores what it receives
// and forwards it chunk by chunk, the last rank only stores.
func broadcast(ctx context.Context, pp *pipe) error {
	a, r, w := pp.a, pp.p.Rank(), pp.p.Size()
	pos := mod(r-a.Root, w)
	switch {
	case pos == 0:
		algos.CopyDistinct(a.Recv, a.Send)
		return pp.run(ctx, []xfer{{buf: a.Send}}, nil)
	case pos == w-1: // the chain's end forwards nothing: a large message goes past the caches
		return pp.run(ctx, nil, []xfer{{buf: a.Recv, cold: len(a.Recv) >= coldBytes}})
	}
	return pp.run(ctx, []xfer{{buf: a.Recv, wait: true}}, []xfer{{buf: a.Recv, signal: true}})
}

// reduceChain is a chain that ends at the root: the rank after the root starts by
// sending its input, each next rank adds its own and forwards (through scratch, since
// Recv is only valid at the root), and the root adds its input last, into Recv.
func reduceChain(ctx context.Context, pp *pipe) error {
	a, r, w := pp.a, pp.p.Rank(), pp.p.Size()
	pos := mod(r-a.Root-1, w)
	switch {
	case pos == 0:
		return pp.run(ctx, []xfer{{buf: a.Send}}, nil)
	case pos == w-1:
		return pp.run(ctx, nil, []xfer{{buf: a.Recv, a: a.Send, finish: true}})
	}
	acc := algos.GetScratch(len(a.Send))
	defer algos.PutScratch(acc)
	return pp.run(ctx, []xfer{{buf: acc, wait: true}}, []xfer{{buf: acc, a: a.Send, signal: true}})
}

// coldBytes is algos.ColdBytes (a variable so that tests can take smaller outputs
// down allReduce2's path).
var coldBytes = algos.ColdBytes

// interleaves reports whether a two-rank AllReduce runs allReduce2: when a segment
// spans several chunks and the links take a chunk eagerly (so a rank with one P runs
// the pipeline on its own goroutine, pipe.serialOK). Every rank decides alike (the
// chunk and eager sizes are agreed at Init), so both send their messages in one order.
// Over tcp, whose chunks exceed the eager size and which always runs a sender and a
// receiver goroutine, the step order keeps more in flight and was faster (17.4 against
// 21.6 ms at 64 MiB); it keeps it.
func interleaves(pp *pipe) bool {
	a := pp.a
	return pp.p.Size() == 2 && pp.cs <= pp.eager && (a.Count-a.Count/2)*a.DType.Size() > pp.cs
}

// allReduce2 is the two-rank ring with its two steps interleaved chunk by chunk. In
// step order the all-gather sends its first chunk a whole segment after the reduce
// that completed it, and reads it back from memory; interleaved, each all-gather chunk
// follows the reduce-scatter chunk of the same index, and goes out while the reduce's
// output is still in the cache. Out of place, the reduce writes each chunk into one
// of two chunk-sized scratch slots, the all-gather sends it from there, and the chunk
// is copied into Recv past the caches (xfer.also): Recv's lines are then written
// without being read first, which a reduce straight into Recv cannot avoid. The
// all-gather's receives are cold (the call's output; from coldBytes only). A slot is
// reused for chunk j+2 once chunk j has been sent: the order already implies it (the
// peer's chunk j+2 comes after this rank's chunk j+1, which goes after chunk j's
// all-gather), and a token makes it explicit. BENCHMARKS.md, "Speed", 26.
func allReduce2(ctx context.Context, pp *pipe, seg func(int) (int, int), cold bool) error {
	a, r, cs := pp.a, pp.p.Rank(), pp.cs
	span := func(i int) xrange { lo, hi := seg(i); return xrange{pp, lo, hi} }
	mine, theirs := span(r), span(r+1)
	// This rank sends mine's chunks (reduce-scatter) and theirs' (all-gather, each after
	// reducing it); the peer sends theirs' and then mine's, in the same merged order.
	nm, nt := algos.NumChunks(mine.n(), cs), algos.NumChunks(theirs.n(), cs)
	st := getSteps(nm + nt)
	defer st.put()
	var slots []byte // out of place: two chunks
	if !algos.SameMemory(a.Send, a.Recv) {
		slots = algos.GetScratch(2 * cs)
		defer algos.PutScratch(slots)
	}
	slot := func(j int) []byte { return slots[j%2*cs:][:len(theirs.of(a.Recv, j))] }
	interleave(nm, nt, func(rs bool, i int) {
		switch {
		case rs:
			st.sends = append(st.sends, xfer{buf: mine.of(a.Send, i)})
		case slots != nil:
			st.sends = append(st.sends, xfer{buf: slot(i), wait: true, signal: true})
		default:
			st.sends = append(st.sends, xfer{buf: theirs.of(a.Recv, i), wait: true})
		}
	})
	interleave(nt, nm, func(rs bool, i int) {
		switch {
		case rs && slots != nil:
			st.recvs = append(st.recvs, xfer{buf: slot(i), a: theirs.of(a.Send, i), finish: true, signal: true,
				wait: i >= 2, also: theirs.of(a.Recv, i)})
		case rs:
			st.recvs = append(st.recvs, xfer{buf: theirs.of(a.Recv, i), a: theirs.of(a.Send, i), finish: true, signal: true})
		default:
			st.recvs = append(st.recvs, xfer{buf: mine.of(a.Recv, i), cold: cold})
		}
	})
	pp.chunked = true
	return pp.runSteps(ctx, st)
}

// xrange is a segment's byte range [lo, hi), cut into the pipe's chunks.
type xrange struct {
	pp     *pipe
	lo, hi int
}

func (x xrange) n() int { return x.hi - x.lo }

// of is chunk i of the range in buf.
func (x xrange) of(buf []byte, i int) []byte {
	lo, hi := algos.Chunk(x.n(), x.pp.cs, i)
	return buf[x.lo+lo : x.lo+hi]
}

// interleaveLag is how many reduce-scatter chunks a rank sends before its first
// all-gather chunk. With one, all-gather chunk j goes right after reduce-scatter chunk
// j, and waits for the peer's chunk j, the one the peer sent first; on the 2-core VM
// one was faster than two (64 MiB in 7.2 against 7.4 ms).
const interleaveLag = 1

// interleave calls fn in the order in which a rank of allReduce2 sends: nrs
// reduce-scatter chunks (rs) and nag all-gather chunks, all-gather chunk j after
// reduce-scatter chunk j+interleaveLag-1 (or after the last).
func interleave(nrs, nag int, fn func(rs bool, i int)) {
	i, j := 0, 0
	for i < nrs || j < nag {
		if i < nrs && (i < j+interleaveLag || j >= nag) {
			fn(true, i)
			i++
		} else {
			fn(false, j)
			j++
		}
	}
}
