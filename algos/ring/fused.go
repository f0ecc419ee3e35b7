package ring

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// The two-rank ring with each reduce written straight into the all-gather's message.
//
// Out of place, allReduce2 reduces each chunk into a scratch slot and then makes two more
// passes over it: a copy into Recv past the caches, and the link's copy of the slot
// into its ring for the all-gather. Where the link lets the sender write a message in
// place (transport.Reserver: shm's ring) and the reduction has a kernel with two
// non-temporal outputs (reduce.Apply3Dual: sums and averages of float32, float64,
// float16 and bfloat16), one pass does all three: the rank reserves the
// all-gather chunk's room in the ring, receives the peer's reduce-scatter chunk and
// writes each piece's sum (or average) both into that room and into Recv, then commits
// the message. In place, Recv is the input, and the pass saves the all-gather's copy.
// Predicted from a two-thread model of the passes: 16 % less time per 64 MiB float32
// call out of place; measured 20 % (10.0 to 8.0 ms, medians of five launches), and
// 8-15 % at 2-16 MiB, where allReduce2 did not run (the output is below coldBytes) and
// the fused steps now do; in place no change beyond the launches' spread
// (BENCHMARKS.md, "Speed", 30). float64 sums: 7-28 % less at 4-64 MiB; float32
// averages, which had a Finish pass besides, 1.9-2.4x faster; the 16-bit sums 0-20 %
// ("Speed", 31); the 16-bit averages 29-47 % at 4-64 MiB ("Speed", 32c).
//
// The messages, their order and their tags are allReduce2's (interleave), so a peer on
// the other path understands this one. The steps run in the calling goroutine, in
// send order; before an all-gather chunk j it takes the peer's all-gather chunks that
// come first in the peer's order, so the next message in is the peer's reduce-scatter
// chunk j, which goes into the fused step. A reservation never waits for room that only
// this rank could free: when it reserves chunk j the peer has consumed everything up to
// this rank's reduce-scatter chunk j-1 (it sent all-gather chunk j-1 after reducing
// that), so at most all-gather chunk j-1, reduce-scatter chunk j and the reservation are
// in the ring, and Reserve takes a chunk only where four fit (ReserveMax).

// fusable reports whether a two-rank AllReduce of a interleaves its steps below the cold
// size too: a sum or average of float32, float64, float16 or bfloat16, which the fused
// steps take (reduce.Apply3Dual has a two-output kernel for each; it finishes an
// average over two ranks by multiplying by one half, after rounding the 16-bit sum as
// Apply3 does). Both ranks decide it alike (it depends on the call alone), as they
// must, since it sets the order of the messages; whether a rank then runs the steps
// fused (fusedLink) is its own affair. Other dtypes and ops keep
// the step order there: fused through a reduce into a buffer in L1 and two streamed
// copies, the three-pass bfloat16 sums of then were up to 1.4x slower and float32 max
// showed no clear gain (BENCHMARKS.md, "Speed", 31a); with their own kernels the 16-bit
// sums gained 0-20 % (31e).
func fusable(a *algos.Args) bool {
	switch a.DType {
	case transport.Float32, transport.Float64, transport.Float16, transport.BFloat16:
		return a.Op == transport.Sum || a.Op == transport.Avg
	}
	return false
}

// fusedLink returns the link to the peer as a transport.Reserver when allReduce2 runs
// fused: the steps run serially on this rank (serialLarge, as for pipe.serial), the
// reduction streams two outputs (reduce.DualStreams) and the link takes a chunk in
// place. Otherwise nil.
func fusedLink(pp *pipe) transport.Reserver {
	a := pp.a
	if !fusable(a) || !reduce.DualStreams(a.DType, a.Op, pp.p.Size()) || !serialLarge(pp.p) {
		return nil
	}
	r, ok := pp.p.Link(pp.next).(transport.Reserver)
	if !ok || r.ReserveMax() < pp.cs {
		return nil
	}
	return r
}

// fused2 runs allReduce2's messages with fused steps (see above); the all-gather's
// receives are cold when the output is (algos.RecvCold).
func fused2(ctx context.Context, pp *pipe, res transport.Reserver, seg func(int) (int, int), cold bool) error {
	a, r, cs := pp.a, pp.p.Rank(), pp.cs
	span := func(i int) xrange { lo, hi := seg(i); return xrange{pp, lo, hi} }
	mine, theirs := span(r), span(r+1)
	nm, nt := algos.NumChunks(mine.n(), cs), algos.NumChunks(theirs.n(), cs)
	sent, got := 0, 0  // messages so far each way, which number the tags
	rsIn, agIn := 0, 0 // the peer's reduce-scatter and all-gather chunks received
	tag := func(msg int) uint32 { return algos.Tag(algos.TagRing, pp.phase, msg) }
	// The peer sends in interleave(nt, nm) order: its reduce-scatter chunk rsIn is next
	// in unless an all-gather chunk comes first.
	rsNext := func() bool { return rsIn < nt && (rsIn < agIn+interleaveLag || agIn >= nm) }
	recvAG := func() error {
		recv := algos.Recv
		if cold {
			recv = algos.RecvCold
		}
		err := recv(ctx, pp.p, pp.prev, tag(got), mine.of(a.Recv, agIn))
		got, agIn = got+1, agIn+1
		return err
	}
	var err error
	interleave(nm, nt, func(rs bool, i int) {
		if err != nil {
			return
		}
		if rs {
			err = algos.Send(ctx, pp.p, pp.next, tag(sent), mine.of(a.Send, i))
			sent++
			return
		}
		for err == nil && !rsNext() {
			err = recvAG()
		}
		if err == nil {
			if err = pp.fusedStep(ctx, res, tag(got), tag(sent), theirs.of(a.Recv, i), theirs.of(a.Send, i)); err != nil {
				err = fmt.Errorf("reduce-scatter chunk %d into all-gather chunk %d: %w", i, i, err)
			}
			got, sent, rsIn = got+1, sent+1, rsIn+1
		}
	})
	for err == nil && agIn < nm {
		err = recvAG()
	}
	return err
}

// fusedStep reserves room for a message of len(dst) bytes to the peer (tag out),
// receives the peer's message of as many bytes (tag in) and writes dst = a op incoming,
// finished (an average divided), both into dst and into the reserved room, then
// commits the message.
func (pp *pipe) fusedStep(ctx context.Context, res transport.Reserver, in, out uint32, dst, a []byte) error {
	first, second, err := res.Reserve(ctx, pp.p.Header(out), len(dst))
	if err != nil {
		return err
	}
	// The closure below goes to the link, so it takes copies, not pp: a pipe captured
	// there would escape to the heap on every call, fused or not.
	dt, op, world := pp.a.DType, pp.a.Op, pp.p.Size()
	done := 0 // the prefix written so far, which the peer may start to read (Advance)
	put := func(off int, p []byte) error {
		next := done
		if off == done {
			next += len(p)
		}
		for len(p) > 0 {
			var room []byte
			if off < len(first) {
				room = first[off:]
			} else {
				room = second[off-len(first):]
			}
			k := min(len(room), len(p))
			if err := reduce.Apply3Dual(dt, op, world, room[:k], dst[off:off+k], a[off:off+k], p[:k]); err != nil {
				return err
			}
			off, p = off+k, p[k:]
		}
		if next > done {
			done = next
			res.Advance(done)
		}
		return nil
	}
	link := pp.p.Link(pp.prev)
	if s, ok := link.(transport.Streamer); ok {
		err = s.RecvStream(ctx, pp.p.Header(in), len(dst), put)
	} else {
		tmp := algos.GetScratch(len(dst))
		if err = link.Recv(ctx, pp.p.Header(in), tmp); err == nil {
			err = put(0, tmp)
		}
		algos.PutScratch(tmp)
	}
	if err != nil {
		res.Abort()
		return err
	}
	return res.Commit(ctx)
}
