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

// Algorithm passes AllReduce through the group's staging area. The zero value is ready
// to use.
type Algorithm struct{}

// Name returns "staged".
func (Algorithm) Name() string { return Name }

// Supports reports AllReduce, the collective it implements.
func (Algorithm) Supports(k transport.Kind) bool { return k == transport.KindAllReduce }

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
	if a.Kind != transport.KindAllReduce {
		return fmt.Errorf("staged: %w: %s (staged implements allreduce)", transport.ErrNotSupported, a.Kind)
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
	es := a.DType.Size()
	// A window holds W slices of whole elements: at least one element per rank.
	win := len(parts[rank]) / 2 / es
	if win < w {
		return fmt.Errorf("staged: %w: a staging part of %d bytes holds no window of %d %s elements",
			algos.ErrNoStaging, len(parts[rank]), w, a.DType)
	}
	n := a.Count * es
	send, recv := a.Send[:n], a.Recv[:n]
	for k, off := 0, 0; off < n; k, off = k+1, off+win*es {
		m := min(win*es, n-off)
		if err := window(ctx, p, a, parts, k, send[off:off+m], recv[off:off+m], k%2*win*es); err != nil {
			return fmt.Errorf("staged: allreduce, window %d (bytes %d-%d of %d): %w", k, off, off+m, n, err)
		}
	}
	if err := handshake(ctx, p, phaseExit, 0); err != nil {
		return fmt.Errorf("staged: allreduce: %w", err)
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
		dst := mine[lo:hi]
		for i := 1; i < w; i++ {
			src := parts[(rank+i)%w][slot+lo : slot+hi]
			var err error
			if i == 1 {
				err = reduce.Apply3(a.DType, a.Op, dst, send[lo:hi], src)
			} else {
				err = reduce.Apply(a.DType, a.Op, dst, src)
			}
			if err != nil {
				return err
			}
		}
		if err := reduce.Finish(a.DType, a.Op, dst, w); err != nil {
			return err
		}
	}
	if err := handshake(ctx, p, phaseFinal, k); err != nil {
		return err
	}
	// In place, recv is send: every slice of it was staged or reduced above, and the
	// peers read only the staging area, so it may be overwritten now.
	out := copyCached
	if a.Count*es > cachedOutputMax {
		out = copyAround
	}
	for i := range w {
		r := (rank + i) % w
		lo, hi := slice(r)
		out(recv[lo:hi], parts[r][slot+lo:slot+hi])
	}
	return nil
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
