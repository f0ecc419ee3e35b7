package staged

import (
	"context"
	"errors"
	"fmt"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// Name is the registry name.
const Name = "staged"

func init() { algos.Register(Algorithm{}) }

// Algorithm passes AllReduce, AllGather, ReduceScatter and Broadcast through the group's
// staging area. The zero value is ready to use.
type Algorithm struct{}

// Name returns "staged".
func (Algorithm) Name() string { return Name }

// Supports reports AllReduce, AllGather, ReduceScatter and Broadcast, the collectives it
// implements.
func (Algorithm) Supports(k transport.Kind) bool {
	switch k {
	case transport.KindAllReduce, transport.KindAllGather, transport.KindReduceScatter, transport.KindBroadcast:
		return true
	}
	return false
}

// Hand-shake phases (the tag's phase field).
const (
	phaseStaged = 1 // every rank has copied the window in
	phaseFinal  = 2 // every slice of the window is reduced
	phaseExit   = 3 // nobody reads this rank's part any more
)

// Run executes a on this rank. Without a staging area (the Peers are no algos.Stager,
// or it says algos.ErrNoStaging) it returns an error wrapping algos.ErrNoStaging on every
// rank, having sent nothing on behalf of the call's data, and the caller may run another
// algorithm on the same call.
func (Algorithm) Run(ctx context.Context, p algos.Peers, a *algos.Args) error {
	rank, w := p.Rank(), p.Size()
	if err := algos.Validate(a, rank, w); err != nil {
		return err
	}
	if !(Algorithm{}).Supports(a.Kind) {
		return fmt.Errorf("staged: %w: %s (staged implements allreduce, allgather, reducescatter and broadcast)", transport.ErrNotSupported, a.Kind)
	}
	if w == 1 {
		return algos.RunLocal(a)
	}
	st, ok := p.(algos.Stager)
	if !ok {
		return fmt.Errorf("staged: %w", algos.ErrNoStaging)
	}
	parts, err := st.Staging(ctx)
	if err != nil {
		return fmt.Errorf("staged: %w", err)
	}
	if len(parts) != w {
		return fmt.Errorf("staged: %w: %d staging parts for %d ranks", transport.ErrProtocol, len(parts), w)
	}
	// A slot (half a part) holds one window: for AllReduce a stretch of the vector of at
	// least one element per rank; for AllGather a stretch of one rank's
	// block, for Broadcast of the vector; for ReduceScatter the same stretch of all W
	// blocks.
	es, slot := a.DType.Size(), len(parts[rank])/2
	step, least := slot/es*es, w*es // bytes of the vector or of one block per window
	switch a.Kind {
	case transport.KindAllGather, transport.KindBroadcast:
		least = es
	case transport.KindReduceScatter:
		step, least = slot/w/es*es, es
	}
	if step < least {
		return fmt.Errorf("staged: %w: a staging part of %d bytes holds no window of a %d-rank %s of %s",
			algos.ErrNoStaging, len(parts[rank]), w, a.Kind, a.DType)
	}
	n := a.Count * es
	for k, off := 0, 0; off < n; k, off = k+1, off+step {
		m := min(step, n-off)
		at := k % 2 * slot
		switch a.Kind {
		case transport.KindAllReduce:
			err = window(ctx, p, a, parts, k, a.Send[off:off+m], a.Recv[off:off+m], at)
		case transport.KindBroadcast:
			err = bcastWindow(ctx, p, a, parts, k, off, m, at)
		case transport.KindAllGather:
			err = gatherWindow(ctx, p, a, parts, k, off, m, at)
		default:
			err = scatterWindow(ctx, p, a, parts, k, off, m, at)
		}
		if err != nil {
			return fmt.Errorf("staged: %s, window %d (bytes %d-%d of %d): %w", a.Kind, k, off, off+m, n, err)
		}
	}
	if err := handshake(ctx, p, phaseExit, 0); err != nil {
		return fmt.Errorf("staged: %s: %w", a.Kind, err)
	}
	return nil
}

// window runs steps 1-3 of the package comment for window number k, whose input is send
// and output recv (equal lengths, the same memory in place), in the slot at byte slot of
// every rank's part.
func window(ctx context.Context, p algos.Peers, a *algos.Args, parts [][]byte, k int, send, recv []byte, slot int) error {
	rank, w := p.Rank(), p.Size()
	es := a.DType.Size()
	count := len(send) / es
	slice := func(r int) (lo, hi int) { return count * r / w * es, count * (r + 1) / w * es }
	mine := parts[rank][slot : slot+len(send)]
	for r := range w {
		if r != rank {
			lo, hi := slice(r)
			copyCached(mine[lo:hi], send[lo:hi])
		}
	}
	if err := handshake(ctx, p, phaseStaged, k); err != nil {
		return err
	}
	lo, hi := slice(rank)
	if hi > lo {
		if err := reduceStaged(a, rank, w, mine[lo:hi], send[lo:hi], parts, slot+lo); err != nil {
			return err
		}
	}
	if err := handshake(ctx, p, phaseFinal, k); err != nil {
		return err
	}
	// In place, recv is send: every slice of it was staged or reduced above, and the
	// peers read only the staging area, so it may be overwritten now.
	out := outputCopy(a.Count * es)
	for i := range w {
		r := (rank + i) % w
		lo, hi := slice(r)
		out(recv[lo:hi], parts[r][slot+lo:slot+hi])
	}
	return nil
}

// gatherWindow runs window k of an AllGather: bytes off..off+m of every rank's block,
// staged in the slot at byte at of every rank's part. Rank r copies its block's window
// into its part, and its own block's window into its output; after a hand-shake (every
// rank has staged the window) it copies every peer's window from that peer's part into
// its output. The next window's hand-shake is the point after which nobody reads this
// window's slot any more (see the package comment).
func gatherWindow(ctx context.Context, p algos.Peers, a *algos.Args, parts [][]byte, k, off, m, at int) error {
	rank, w := p.Rank(), p.Size()
	n := a.Count * a.DType.Size()
	copyCached(parts[rank][at:at+m], a.Send[off:off+m])
	out := outputCopy(w * n)
	if own := a.Recv[rank*n+off : rank*n+off+m]; !algos.SameMemory(own, a.Send[off:off+m]) {
		out(own, a.Send[off:off+m])
	}
	if err := handshake(ctx, p, phaseStaged, k); err != nil {
		return err
	}
	for i := 1; i < w; i++ {
		r := (rank + i) % w
		out(a.Recv[r*n+off:r*n+off+m], parts[r][at:at+m])
	}
	return nil
}

// bcastWindow runs window k of a Broadcast: bytes off..off+m of the vector, staged in the
// slot at byte at of the root's part. The root copies its input's window into its part
// (and into its output); after a hand-shake every other rank copies it from there into
// its output.
func bcastWindow(ctx context.Context, p algos.Peers, a *algos.Args, parts [][]byte, k, off, m, at int) error {
	out := outputCopy(a.Count * a.DType.Size())
	if p.Rank() == a.Root {
		copyCached(parts[a.Root][at:at+m], a.Send[off:off+m])
		if own := a.Recv[off : off+m]; !algos.SameMemory(own, a.Send[off:off+m]) {
			out(own, a.Send[off:off+m])
		}
	}
	if err := handshake(ctx, p, phaseStaged, k); err != nil {
		return err
	}
	if p.Rank() != a.Root {
		out(a.Recv[off:off+m], parts[a.Root][at:at+m])
	}
	return nil
}

// scatterWindow runs window k of a ReduceScatter: bytes off..off+m of every rank's
// block, staged in the slot at byte at of every rank's part, whose piece q (m bytes at
// at+q*m) holds the window of block q. Rank r copies the window of every block but its
// own into its part; after a hand-shake (every rank has staged the window) it reduces
// the window of block r, its own input's first and then every peer's staged piece in
// rank order from r+1, straight into its output. Each block is reduced by one rank in a
// fixed order, as in the AllReduce.
func scatterWindow(ctx context.Context, p algos.Peers, a *algos.Args, parts [][]byte, k, off, m, at int) error {
	rank, w := p.Rank(), p.Size()
	n := a.Count * a.DType.Size()
	mine := parts[rank][at : at+w*m]
	for q := range w {
		if q != rank {
			copyCached(mine[q*m:(q+1)*m], a.Send[q*n+off:q*n+off+m])
		}
	}
	if err := handshake(ctx, p, phaseStaged, k); err != nil {
		return err
	}
	return reduceStaged(a, rank, w, a.Recv[off:off+m], a.Send[rank*n+off:rank*n+off+m], parts, at+rank*m)
}

// reduceStaged reduces into dst rank's own input own and every peer's staged copy of
// the same stretch (len(dst) bytes at byte at of its part), in rank order from rank+1,
// and finishes the reduction (avg): the one fixed order that gives every rank the same
// bits.
func reduceStaged(a *algos.Args, rank, w int, dst, own []byte, parts [][]byte, at int) error {
	for i := 1; i < w; i++ {
		src := parts[(rank+i)%w][at : at+len(dst)]
		var err error
		if i == 1 {
			err = reduce.Apply3(a.DType, a.Op, dst, own, src)
		} else {
			err = reduce.Apply(a.DType, a.Op, dst, src)
		}
		if err != nil {
			return err
		}
	}
	return reduce.Finish(a.DType, a.Op, dst, w)
}

// outputCopy is how a call whose output is total bytes copies into it: through the
// cache up to cachedOutputMax, around it above.
func outputCopy(total int) func(dst, src []byte) {
	if total > cachedOutputMax {
		return copyAround
	}
	return copyCached
}

// The stores of a copy either stay in the cache or go around it (non-temporal stores,
// straight to memory), and which is faster depends on whether the bytes are read again
// soon. The runtime's memmove decides by the length of one copy: on amd64 it goes
// around the cache from 1 MiB (at 2 ranks a staged slice is 2 MiB). A staged slice is
// read again at once (by the peer that reduces it), so it is copied in pieces of
// cachedPiece, below that length; the output of a call up to cachedOutputMax bytes
// likewise, as its caller is likely to read it while it is still in the cache; a larger
// output would only push the staging area out of the cache, so its slices are copied
// whole (around the cache where they reach 1 MiB). Measured in BENCHMARKS.md, "Speed",
// 17: staging in pieces took 8-22 % off 64 MiB at 2 ranks; outputs of 2-4 MiB in
// pieces took 4-21 % off, outputs of 8 MiB and more were 1-43 % slower.
const (
	cachedPiece     = 512 << 10
	cachedOutputMax = 4 << 20
)

// copyCached copies src to dst (equal lengths) in pieces that the runtime's memmove
// writes through the cache.
func copyCached(dst, src []byte) {
	for off := 0; off < len(src); off += cachedPiece {
		end := min(off+cachedPiece, len(src))
		copy(dst[off:end], src[off:end])
	}
}

// copyAround copies src to dst (equal lengths) as one memmove, which goes around the
// cache when the slice is large.
func copyAround(dst, src []byte) { copy(dst, src) }

// handshake sends an empty message to every peer, then receives one from every peer:
// when it returns, every rank has reached the same point of window k. Empty messages fit
// the links' eager buffering, so the sends complete without the peers' receives.
func handshake(ctx context.Context, p algos.Peers, phase uint8, k int) error {
	rank, w := p.Rank(), p.Size()
	tag := algos.Tag(algos.TagStaged, phase, k)
	for i := 1; i < w; i++ {
		if err := algos.Send(ctx, p, (rank+i)%w, tag, nil); err != nil {
			return err
		}
	}
	for i := 1; i < w; i++ {
		if err := algos.Recv(ctx, p, (rank-i+w)%w, tag, nil); err != nil {
			return err
		}
	}
	return nil
}

// Unavailable reports whether err says that the group had no staging area for the call
// (every rank gets it alike, so every rank may run the call with another algorithm).
func Unavailable(err error) bool { return errors.Is(err, algos.ErrNoStaging) }
