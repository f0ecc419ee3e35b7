package direct

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// Name is the registry name.
const Name = "direct"

// ErrNotShared says that some rank's buffers for this call are not in shared memory (or
// the group has none). Every rank of the call gets it alike, after the entry hand-shake
// or without any message, and may then run the call with another algorithm.
var ErrNotShared = errors.New("direct: the buffers are not in shared memory on every rank")

func init() { algos.Register(Algorithm{}) }

// Algorithm reads peers' shared buffers in place. The zero value is ready to use.
type Algorithm struct{}

// Name returns "direct".
func (Algorithm) Name() string { return Name }

// Supports reports the collectives that gain from reading in place.
func (Algorithm) Supports(k transport.Kind) bool {
	switch k {
	case transport.KindAllReduce, transport.KindReduceScatter, transport.KindAllGather, transport.KindBroadcast,
		transport.KindScatter, transport.KindAllToAll:
		return true
	}
	// Not Gather: its root would copy every input itself, one after another, where the
	// other algorithms have the senders copy in parallel (measured 1.3-6x slower up to
	// 4 MiB). Not Reduce: the root alone would do every reduction.
	return false
}

// Hand-shake phases (the tag's phase field).
const (
	phaseEntry = 1
	phaseMid   = 2
	phaseExit  = 3
)

// desc is where one rank's buffers are: allocation number (-1: not shared) and offset.
type desc struct{ sendAlloc, sendOff, recvAlloc, recvOff int }

const descBytes = 32

func (d desc) put(b []byte) {
	for i, v := range [4]int{d.sendAlloc, d.sendOff, d.recvAlloc, d.recvOff} {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(v)))
	}
}

func getDesc(b []byte) desc {
	v := func(i int) int { return int(int64(binary.LittleEndian.Uint64(b[8*i:]))) }
	return desc{v(0), v(1), v(2), v(3)}
}

// Run executes a on this rank, or returns ErrNotShared on every rank.
func (Algorithm) Run(ctx context.Context, p algos.Peers, a *algos.Args) error {
	rank, w := p.Rank(), p.Size()
	if err := algos.Validate(a, rank, w); err != nil {
		return err
	}
	if !(Algorithm{}).Supports(a.Kind) {
		return fmt.Errorf("direct: %w: %s (direct implements allreduce, reducescatter, allgather, broadcast, scatter, alltoall)", transport.ErrNotSupported, a.Kind)
	}
	if w == 1 {
		return algos.RunLocal(a)
	}
	sh, ok := p.(algos.Shared)
	if !ok || sh.SharedAllocs() == 0 {
		return ErrNotShared
	}
	descs, err := exchange(ctx, p, sh, a)
	if err != nil {
		return fmt.Errorf("direct: %s: %w", a.Kind, err)
	}
	if !usable(a, descs) {
		return ErrNotShared
	}
	r := run{p: p, sh: sh, a: a, descs: descs, rank: rank, w: w}
	switch a.Kind {
	case transport.KindAllReduce:
		err = r.allReduce(ctx)
	case transport.KindReduceScatter:
		err = r.reduceScatter(ctx)
	case transport.KindAllGather:
		err = r.allGather(ctx)
	case transport.KindBroadcast:
		err = r.broadcast(ctx)
	case transport.KindScatter:
		err = r.scatter(ctx)
	case transport.KindAllToAll:
		err = r.allToAll(ctx)
	}
	if err != nil {
		return fmt.Errorf("direct: %s: %w", a.Kind, err)
	}
	return nil
}

// exchange sends this rank's desc to every peer and returns all W of them.
func exchange(ctx context.Context, p algos.Peers, sh algos.Shared, a *algos.Args) ([]desc, error) {
	rank, w := p.Rank(), p.Size()
	d := desc{sendAlloc: -1, recvAlloc: -1}
	if alloc, off, ok := sh.Locate(a.Send); ok {
		d.sendAlloc, d.sendOff = alloc, off
	}
	if alloc, off, ok := sh.Locate(a.Recv); ok {
		d.recvAlloc, d.recvOff = alloc, off
	}
	descs := make([]desc, w)
	descs[rank] = d
	var buf [descBytes]byte
	d.put(buf[:])
	if err := everyPeer(ctx, p, phaseEntry, buf[:], func(peer int, b []byte) { descs[peer] = getDesc(b) }); err != nil {
		return nil, err
	}
	return descs, nil
}

// everyPeer sends msg to every peer, then receives one message of the same length from
// every peer (handing it to got). Every message fits the links' eager buffering, so the
// sends complete without the peers' receives.
func everyPeer(ctx context.Context, p algos.Peers, phase uint8, msg []byte, got func(peer int, b []byte)) error {
	rank, w := p.Rank(), p.Size()
	for i := 1; i < w; i++ {
		peer := (rank + i) % w
		if err := algos.Send(ctx, p, peer, algos.Tag(algos.TagDirect, phase, 0), msg); err != nil {
			return err
		}
	}
	var in [descBytes]byte
	for i := 1; i < w; i++ {
		peer := (rank - i + w) % w
		b := in[:len(msg)]
		if err := algos.Recv(ctx, p, peer, algos.Tag(algos.TagDirect, phase, 0), b); err != nil {
			return err
		}
		if got != nil {
			got(peer, b)
		}
	}
	return nil
}

// usable is the rule every rank applies to the same descriptions: the buffers that
// peers read are shared on every rank that has them.
func usable(a *algos.Args, descs []desc) bool {
	for r, d := range descs {
		switch a.Kind {
		case transport.KindAllReduce:
			if d.sendAlloc < 0 || d.recvAlloc < 0 {
				return false
			}
		case transport.KindReduceScatter, transport.KindAllGather:
			if d.sendAlloc < 0 {
				return false
			}
		case transport.KindAllToAll:
			// In place, a rank would overwrite blocks of its input that peers are still
			// reading: such a call takes the other path on every rank.
			if d.sendAlloc < 0 || d.sendAlloc == d.recvAlloc && d.sendOff == d.recvOff {
				return false
			}
		case transport.KindBroadcast, transport.KindScatter: // everyone reads the root's input
			if r == a.Root && d.sendAlloc < 0 {
				return false
			}
		}
	}
	return true
}

// run is one call's state once the ranks have agreed to read in place.
type run struct {
	p     algos.Peers
	sh    algos.Shared
	a     *algos.Args
	descs []desc
	rank  int
	w     int
}

// send is n bytes at off of rank r's input; recv the same of its output.
func (r *run) send(peer, off, n int) ([]byte, error) {
	if peer == r.rank {
		return r.a.Send[off : off+n], nil
	}
	d := r.descs[peer]
	return r.sh.PeerView(peer, d.sendAlloc, d.sendOff+off, n)
}

func (r *run) recv(peer, off, n int) ([]byte, error) {
	if peer == r.rank {
		return r.a.Recv[off : off+n], nil
	}
	d := r.descs[peer]
	return r.sh.PeerView(peer, d.recvAlloc, d.recvOff+off, n)
}

// slice is rank i's part [lo, hi) of count elements, in bytes.
func (r *run) slice(count, i int) (lo, hi int) {
	es := r.a.DType.Size()
	return count * i / r.w * es, count * (i + 1) / r.w * es
}

// blockBytes is the unit reduceInto works in: small enough that a block of the output
// stays in the core's cache while every peer's input is added to it (at W ranks the
// output then crosses memory twice instead of 2(W-1) times), large enough that the
// kernel calls cost nothing against the bytes.
const blockBytes = 64 << 10

// reduceInto sets dst = op over every rank's input at [off, off+len(dst)), starting
// with this rank's own, block by block.
func (r *run) reduceInto(dst []byte, off int) error {
	a := r.a
	srcs := make([][]byte, r.w-1)
	for i := range srcs {
		var err error
		if srcs[i], err = r.send((r.rank+1+i)%r.w, off, len(dst)); err != nil {
			return err
		}
	}
	own := a.Send[off : off+len(dst)]
	inPlace := algos.SameMemory(dst, own)
	if len(srcs) == 1 && !inPlace {
		// One pass, and the peers read dst only after the next hand-shake, from memory:
		// store it without reading its lines first. (In place, dst's lines are in the
		// cache already, read as an input; streaming them measured no faster.)
		if err := reduce.Apply3Stream(a.DType, a.Op, dst, own, srcs[0]); err != nil {
			return err
		}
		return reduce.Finish(a.DType, a.Op, dst, r.w)
	}
	es := a.DType.Size()
	step := max(blockBytes/es*es, es)
	for lo := 0; lo < len(dst); lo += step {
		hi := min(lo+step, len(dst))
		for i, src := range srcs {
			var err error
			if i == 0 && !inPlace {
				err = reduce.Apply3(a.DType, a.Op, dst[lo:hi], own[lo:hi], src[lo:hi])
			} else {
				err = reduce.Apply(a.DType, a.Op, dst[lo:hi], src[lo:hi])
			}
			if err != nil {
				return err
			}
		}
	}
	return reduce.Finish(a.DType, a.Op, dst, r.w)
}

func (r *run) allReduce(ctx context.Context) error {
	lo, hi := r.slice(r.a.Count, r.rank)
	if err := r.reduceInto(r.a.Recv[lo:hi], lo); err != nil {
		return err
	}
	if err := everyPeer(ctx, r.p, phaseMid, nil, nil); err != nil {
		return err
	}
	for i := 1; i < r.w; i++ {
		peer := (r.rank + i) % r.w
		lo, hi := r.slice(r.a.Count, peer)
		src, err := r.recv(peer, lo, hi-lo)
		if err != nil {
			return err
		}
		copy(r.a.Recv[lo:hi], src)
	}
	return everyPeer(ctx, r.p, phaseExit, nil, nil)
}

func (r *run) reduceScatter(ctx context.Context) error {
	n := r.a.Count * r.a.DType.Size()
	if err := r.reduceInto(r.a.Recv[:n], r.rank*n); err != nil {
		return err
	}
	return everyPeer(ctx, r.p, phaseExit, nil, nil)
}

func (r *run) allGather(ctx context.Context) error {
	n := r.a.Count * r.a.DType.Size()
	for i := range r.w {
		peer := (r.rank + i) % r.w
		src, err := r.send(peer, 0, n)
		if err != nil {
			return err
		}
		algos.CopyDistinct(r.a.Recv[peer*n:(peer+1)*n], src)
	}
	return everyPeer(ctx, r.p, phaseExit, nil, nil)
}

func (r *run) broadcast(ctx context.Context) error { return r.fromRoot(ctx, 0) }

func (r *run) scatter(ctx context.Context) error {
	return r.fromRoot(ctx, r.rank*r.a.Count*r.a.DType.Size())
}

// fromRoot copies this rank's Count elements from the root's send buffer at byte off
// into Recv, then waits until no peer reads this rank's buffers any more.
func (r *run) fromRoot(ctx context.Context, off int) error {
	n := r.a.Count * r.a.DType.Size()
	src, err := r.send(r.a.Root, off, n)
	if err != nil {
		return err
	}
	algos.CopyDistinct(r.a.Recv[:n], src)
	return everyPeer(ctx, r.p, phaseExit, nil, nil)
}

func (r *run) allToAll(ctx context.Context) error {
	n := r.a.Count * r.a.DType.Size()
	for i := range r.w {
		peer := (r.rank + i) % r.w
		src, err := r.send(peer, r.rank*n, n)
		if err != nil {
			return err
		}
		copy(r.a.Recv[peer*n:(peer+1)*n], src)
	}
	return everyPeer(ctx, r.p, phaseExit, nil, nil)
}
