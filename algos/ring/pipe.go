package ring

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// xfer is one step of one side of the ring pipeline: what the sender sends to the next
// rank, or where the receiver puts what the previous rank sent. Both sides cut every
// step into chunks the same way, so the k-th message on the link means the same bytes to
// both ends.
type xfer struct {
	buf    []byte // send: the source; recv: the destination
	a      []byte // recv: reduce buf = a op incoming (nil: plain copy into buf)
	finish bool   // recv: apply the op's Finish (Avg's division) to each chunk
	wait   bool   // wait for one token from the other side before each chunk
	signal bool   // give one token to the other side after each chunk
}

// pipe runs a sender (to next) and a receiver (from prev) concurrently over their step
// lists. Tokens express the data dependencies inside this rank: the receiver signals
// "chunk reduced" to a waiting sender (forwarding), and the sender signals "chunk sent"
// to a waiting receiver (reusing a scratch buffer). Each token is consumed in order, so
// the k-th wait matches the k-th signal. The first error cancels the other side.
type pipe struct {
	p          algos.Peers
	a          *algos.Args
	next, prev int
	cs         int   // chunk size in bytes
	eager      int   // algos.EagerLimit of the links
	phase      uint8 // tag phase, distinct per collective shape
}

func (pp *pipe) run(ctx context.Context, sends, recvs []xfer) error {
	if pp.serialOK(sends, recvs) {
		return pp.serial(ctx, sends, recvs)
	}
	var fwd, rev algos.Progress // fwd: receiver -> sender; rev: sender -> receiver
	g, ctx := errgroup.WithContext(ctx)
	if len(sends) > 0 {
		g.Go(func() error { return pp.sender(ctx, sends, &fwd, &rev) })
	}
	if len(recvs) > 0 {
		g.Go(func() error { return pp.receiver(ctx, recvs, &fwd, &rev) })
	}
	return g.Wait()
}

func (pp *pipe) sender(ctx context.Context, steps []xfer, fwd, rev *algos.Progress) error {
	msg, waited := 0, 0
	for s, x := range steps {
		for i := range algos.NumChunks(len(x.buf), pp.cs) {
			if x.wait {
				waited++
				if err := fwd.Wait(ctx, waited); err != nil {
					return err
				}
			}
			lo, hi := algos.Chunk(len(x.buf), pp.cs, i)
			if err := algos.Send(ctx, pp.p, pp.next, algos.Tag(algos.TagRing, pp.phase, msg), x.buf[lo:hi]); err != nil {
				return fmt.Errorf("step %d chunk %d: %w", s, i, err)
			}
			msg++
			if x.signal {
				rev.Advance()
			}
		}
	}
	return nil
}

func (pp *pipe) receiver(ctx context.Context, steps []xfer, fwd, rev *algos.Progress) error {
	a := pp.a
	msg, waited := 0, 0
	for s, x := range steps {
		for i := range algos.NumChunks(len(x.buf), pp.cs) {
			if x.wait {
				waited++
				if err := rev.Wait(ctx, waited); err != nil {
					return err
				}
			}
			lo, hi := algos.Chunk(len(x.buf), pp.cs, i)
			t := algos.Tag(algos.TagRing, pp.phase, msg)
			var err error
			if x.a != nil {
				err = algos.RecvReduce(ctx, pp.p, pp.prev, t, a.DType, a.Op, x.buf[lo:hi], x.a[lo:hi])
			} else {
				err = algos.Recv(ctx, pp.p, pp.prev, t, x.buf[lo:hi])
			}
			if err == nil && x.finish {
				err = reduce.Finish(a.DType, a.Op, x.buf[lo:hi], pp.p.Size())
			}
			if err != nil {
				return fmt.Errorf("step %d chunk %d: %w", s, i, err)
			}
			msg++
			if x.signal {
				fwd.Advance()
			}
		}
	}
	return nil
}

// serialOK reports whether the pipeline may run in the calling goroutine: every step
// is one message of at most the links' eager size (algos.EagerLimit), however many
// chunks the pipelined path would cut it into (every rank decides alike: both sizes are
// agreed at Init). Small collectives are latency-bound, and
// two goroutines per call cost more than the messages themselves (each hand-off wakes
// an idle thread of the Go runtime: about a third of an 8-byte AllReduce's CPU time
// went there, see BENCHMARKS.md, "Speed"). It is deadlock-free because the serial order (below)
// never has more than two messages unread on a link, which every transport buffers.
func (pp *pipe) serialOK(sends, recvs []xfer) bool {
	for _, list := range [2][]xfer{sends, recvs} {
		for _, x := range list {
			if len(x.buf) > pp.eager {
				return false
			}
		}
	}
	return true
}

// serial runs single-message steps in one goroutine, preferring the next send whenever
// its token is there and otherwise taking the next receive. Tokens are plain counters
// here; the k-th wait still matches the k-th signal, as in sender and receiver. Every
// rank's sends alternate with its receives, so a link holds at most two unread
// messages at any time.
func (pp *pipe) serial(ctx context.Context, sends, recvs []xfer) error {
	a := pp.a
	var fwd, rev, fwdUsed, revUsed int // tokens given and taken, as in run
	si, ri := 0, 0
	for si < len(sends) || ri < len(recvs) {
		if si < len(sends) && (!sends[si].wait || fwd > fwdUsed) {
			x := sends[si]
			if x.wait {
				fwdUsed++
			}
			if err := algos.Send(ctx, pp.p, pp.next, algos.Tag(algos.TagRing, pp.phase, si), x.buf); err != nil {
				return fmt.Errorf("step %d chunk 0: %w", si, err)
			}
			if x.signal {
				rev++
			}
			si++
			continue
		}
		if ri == len(recvs) || (recvs[ri].wait && rev <= revUsed) {
			// Unreachable for the schedules in ring.go: say so instead of spinning.
			return fmt.Errorf("%w: ring pipeline stalled at send %d/%d, receive %d/%d", transport.ErrInvalid, si, len(sends), ri, len(recvs))
		}
		x := recvs[ri]
		if x.wait {
			revUsed++
		}
		t := algos.Tag(algos.TagRing, pp.phase, ri)
		var err error
		if x.a != nil {
			err = algos.RecvReduce(ctx, pp.p, pp.prev, t, a.DType, a.Op, x.buf, x.a)
		} else {
			err = algos.Recv(ctx, pp.p, pp.prev, t, x.buf)
		}
		if err == nil && x.finish {
			err = reduce.Finish(a.DType, a.Op, x.buf, pp.p.Size())
		}
		if err != nil {
			return fmt.Errorf("step %d chunk 0: %w", ri, err)
		}
		if x.signal {
			fwd++
		}
		ri++
	}
	return nil
}
