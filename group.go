package goccl

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/internal/relstore"
	"github.com/goccl/goccl/transport"
)

// extOp is an operation that is neither a collective nor a SendRecv: a BatchSendRecv
// (*batchCall) or an AllToAllV (*allToAllV), whose point-to-point messages travel on
// the pair sequences that Send, Recv and SendRecv use, or SetAlgo's change
// (*setAlgo). It names itself for the flight recorder and traces. runExt runs it on
// the general path (Comm.run), fastExt on the fast path if it may (fastCall), as
// fastP2P runs a SendRecv. They dispatch with a type switch, not through the
// interface: an opSpec passed to an interface method escapes, and every blocking
// call's would then be allocated.
type extOp interface {
	fmt.Stringer
	failed() transport.Fingerprint // what a failed call tells its peers it was in (failOp)
}

// runExt runs x as w on the general path.
func (c *Comm) runExt(ctx context.Context, w *Work, x extOp) error {
	var err error
	switch x := x.(type) {
	case *setAlgo:
		x.sel.model = c.sel.Load().model
		c.sel.Store(x.sel)
		return nil
	case *batchCall:
		w.algo = "p2p"
		err = c.runBatch(ctx, x.ops)
	case *allToAllV:
		w.algo = "p2p"
		err = c.runAllToAllV(ctx, w, x)
	default:
		return fmt.Errorf("goccl: rank %d: %w: unknown operation %T", c.rank, transport.ErrInvalid, x)
	}
	if err != nil {
		// As a collective's: the ranks agree on the root cause, and every peer hears of
		// the failure (failure.go).
		err = c.failOp(ctx, transport.Header{Seq: c.seq, Fp: x.failed()}, err)
	}
	return err
}

// fastExt runs op, whose ext is set, on the fast path if it may (done).
func (c *Comm) fastExt(ctx context.Context, w *Work, op *opSpec) (done bool, err error) {
	switch g := op.ext.(type) {
	case *batchCall:
		return c.fastBatch(ctx, w, op, g)
	case *allToAllV:
		return c.fastAllToAllV(ctx, w, op, g)
	}
	return false, nil
}

// fastXfers runs xs, the messages of a BatchSendRecv or an AllToAllV of host memory
// (numbered by p2pXfer), on the fast path if it may (done) and returns the call's
// error; the caller holds execMu and releases it after. As for fastP2P: the sends
// first, in the order of xs, each where its link takes it at once
// (transport.TrySender; shm up to 2 KiB, tcp 16 KiB), then the books, then self (the
// block a rank sends itself; nil for none), then the receives on the calling goroutine
// in the order of xs, as runXfers runs them, and the end left pending (BENCHMARKS.md,
// "Speed", 41).
//
// Where the first send does not go at once, nothing has happened: the numbers p2pXfer
// gave are taken back and the call takes the general path. Where a later one does not
// (a full ring, a larger message), the books are kept and fastRest sends it and the
// rest beside the receives; written says whether the call writes any byte of a send's
// memory (a receive, or the block to the rank itself). A send that left did so before
// anything was written, so what it carried is its buffer from before the call, in
// place or not.
func (c *Comm) fastXfers(ctx context.Context, w *Work, op *opSpec, xs []xfer, byPeer bool, written func([]byte) bool, self func()) (done bool, err error) {
	sends := c.fast.groupSends[:0] // counted and flushed once the books are kept
	defer func() { clear(sends); c.fast.groupSends = sends[:0] }()
	k := 0 // the sends of xs[:k] have left
	for ; k < len(xs); k++ {
		x := &xs[k]
		if x.recv {
			continue
		}
		out := c.obsLink(x.peer)
		if out == nil || out.try == nil {
			break
		}
		if ok, err := out.try.TrySend(x.h, x.buf); err != nil || !ok {
			break // the general path sends it, or reports the link's error
		}
		sends = append(sends, sentTo{s: out.state, n: len(x.buf), try: out.try})
	}
	if len(sends) == 0 && k < len(xs) {
		for _, x := range xs {
			if x.recv {
				c.recvSeq[x.peer]--
			} else {
				c.sendSeq[x.peer]--
			}
		}
		return false, nil
	}
	c.fast.groups++
	// Where every send left, the receives run on the links themselves, as fastP2P's
	// does, each marked as the observer would mark it (obsConn.recv), and are counted
	// with the sends under the one hold of mu: a locked add and two calls fewer per
	// message (BENCHMARKS.md, "Speed", 43). fastRest's go through the observer.
	recvs := xs
	if k < len(xs) {
		recvs = nil
	}
	start, tick, p := c.fastBegin(ctx, w, op, "p2p", nil, nil, recvs, sends...)
	for i, x := range sends {
		if i == 0 || x.try != sends[i-1].try {
			x.try.Flush()
		}
	}
	if k < len(xs) {
		c.fast.rests++
		err = c.fastRest(&c.op, xs, k, byPeer, written, self)
	} else {
		if self != nil {
			self()
		}
		err = c.fastRecvs(xs, start)
	}
	if err != nil {
		return true, c.fastFail(w, op, start, p, c.failOp(&c.op, transport.Header{Seq: c.seq, Fp: op.ext.failed()}, err))
	}
	return true, c.fastEnd(w, op, start, tick, p, nil, 0)
}

// fastRecvs runs the receives of xs, in order, for fastXfers, whose call began at
// start and counted them. A receive that fails takes the bytes of the receives not
// done back from those counts.
func (c *Comm) fastRecvs(xs []xfer, start int64) error {
	for i := range xs {
		x := &xs[i]
		if !x.recv {
			continue
		}
		in := c.obsLink(x.peer)
		s := in.state
		relstore.Int64(&s.recvSince, start)
		err := in.Conn.Recv(&c.op, x.h, x.buf)
		relstore.Int64(&s.recvSince, 0)
		if err != nil {
			c.mu.Lock()
			for j := i; j < len(xs); j++ {
				if y := &xs[j]; y.recv {
					c.linkStates[y.peer].fastReceived -= uint64(len(y.buf))
				}
			}
			c.mu.Unlock()
			return fmt.Errorf("goccl: rank %d: recv from rank %d: %w", c.rank, x.peer, in.blocked(err, "receive from", start))
		}
	}
	return nil
}

// fastRest runs what fastXfers left: the sends of xs[k:] and every receive, as the
// general path would (runXfers, byPeer), after self. A send whose memory the call
// writes goes from a copy, taken first.
func (c *Comm) fastRest(ctx context.Context, xs []xfer, k int, byPeer bool, written func([]byte) bool, self func()) error {
	rest := xs[:0]
	for i, x := range xs {
		if x.recv || i >= k {
			rest = append(rest, x)
		}
	}
	for i := range rest {
		if x := &rest[i]; !x.recv && len(x.buf) > 0 && written(x.buf) {
			tmp := algos.GetScratch(len(x.buf))
			defer algos.PutScratch(tmp)
			copy(tmp, x.buf)
			x.buf = tmp
		}
	}
	if self != nil {
		self()
	}
	return c.runXfers(ctx, rest, byPeer)
}

// fastBatch runs b, a BatchSendRecv of host memory with no op to or from this rank
// itself, on the fast path if it may (fastXfers); others take the general path
// (runBatch).
func (c *Comm) fastBatch(ctx context.Context, w *Work, op *opSpec, b *batchCall) (bool, error) {
	ops := b.ops
	for i := range ops {
		if o := &ops[i]; o.Peer == c.rank || o.Buf.Kind() != transport.Host {
			return false, nil
		}
	}
	if c.checkBatch(ops) != nil {
		return false, nil // the general path says what is wrong
	}
	sc := &c.batch
	defer sc.release()
	xs := sc.xs
	for i := range ops {
		o := &ops[i]
		xs = c.p2pXfer(xs, o.Peer, o.Recv, KindSendRecv, o.Count, o.DType, o.Buf.Bytes()[:o.Count*o.DType.Size()])
	}
	sc.xs = xs
	return c.fastXfers(ctx, w, op, xs, true, c.receivesInto, nil)
}

// fastAllToAllV runs a, an AllToAllV of host memory that is not NCCL's, on the fast
// path if it may (fastXfers): its blocks in the pairwise order, the block to this rank
// itself copied once every other has left.
func (c *Comm) fastAllToAllV(ctx context.Context, w *Work, op *opSpec, a *allToAllV) (bool, error) {
	if a.send.Kind() != transport.Host || a.recv.Kind() != transport.Host || c.offload != nil && c.offload.Offloads(transport.KindAllToAllV) {
		return false, nil
	}
	sendN, recvN, err := c.checkAllToAllV(a)
	if err != nil {
		return false, nil // the general path says what is wrong
	}
	defer c.batch.release()
	r := a.recv.Bytes()[:recvN]
	xs, selfSrc, selfDst := c.allToAllVXfers(a, a.send.Bytes()[:sendN], r)
	return c.fastXfers(ctx, w, op, xs, false, func(p []byte) bool { return !algos.Apart(p, r) }, func() { copy(selfDst, selfSrc) })
}
