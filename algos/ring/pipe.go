package ring

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/internal/streamcopy"
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
	cold   bool   // recv: the caller will not read buf soon (algos.RecvCold, RecvReduceCold)
	also   []byte // recv: after the chunk lands in buf, copy it here too, past the caches
}

// steps holds the two step lists a collective builds for pipe.runSteps. They come from a pool
// and go back after the call (runSteps hands them to its goroutines as they are): built
// by append on every call, an AllReduce at 4 ranks allocated about 2.6 KiB in 9 pieces,
// and a process whose heap is large (128 MiB buffers, so the collector runs rarely)
// then faulted in fresh pages for them call after call, which made the ring's 8-byte
// AllReduce at 4 ranks on 2 cores 2-3x slower (BENCHMARKS.md, "Speed", 28e).
type steps struct {
	sends, recvs []xfer
	pp           pipe // the pipeline's copy for its goroutines (runSteps)
}

var stepsPool = sync.Pool{New: func() any { return new(steps) }}

// getSteps returns empty step lists with room for n steps on each side.
func getSteps(n int) *steps {
	st := stepsPool.Get().(*steps)
	if cap(st.sends) < n {
		st.sends, st.recvs = make([]xfer, 0, n), make([]xfer, 0, n)
	}
	st.sends, st.recvs = st.sends[:0], st.recvs[:0]
	return st
}

// put returns the lists to the pool, without the buffers they point into.
func (st *steps) put() {
	clear(st.sends)
	clear(st.recvs)
	st.pp = pipe{}
	stepsPool.Put(st)
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
	whole      bool  // serial: every step is one message (see serialOK)
	chunked    bool  // every step is one chunk already (allReduce2): not a reason to run serially
	phase      uint8 // tag phase, distinct per collective shape
}

// run moves sends and recvs, on this goroutine when serialOK allows, else on a sender
// and a receiver goroutine. Only that second path hands the pipe and the lists to other
// goroutines, and it does so with copies, so that the caller's pipe and transfer lists
// stay on its stack and a small call allocates nothing for them (a small Broadcast
// allocated both on every call, 2 allocations per rank: BENCHMARKS.md, "Speed", 21).
func (pp *pipe) run(ctx context.Context, sends, recvs []xfer) error {
	if pp.serialOK(sends, recvs) {
		return pp.serial(ctx, sends, recvs)
	}
	q := new(pipe)
	*q = *pp
	return q.pipelined(ctx, slices.Clone(sends), slices.Clone(recvs))
}

// runSteps is run for lists from getSteps. They live in the pool's object already, and
// so does the pipe's copy, so the goroutine path hands them over as they are: the copies
// were most of the 1.9 KiB a pipelined AllReduce allocated per call and rank at 4 ranks
// (BENCHMARKS.md, "Speed", 29d).
func (pp *pipe) runSteps(ctx context.Context, st *steps) error {
	if pp.serialOK(st.sends, st.recvs) {
		return pp.serial(ctx, st.sends, st.recvs)
	}
	st.pp = *pp
	return st.pp.pipelined(ctx, st.sends, st.recvs)
}

// pipelined runs sends on a sender goroutine and recvs on a receiver goroutine, and
// waits for both. Both lists and pp must stay unchanged until it returns.
func (pp *pipe) pipelined(ctx context.Context, sends, recvs []xfer) error {
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
			if err := pp.recv(ctx, x, t, lo, hi); err != nil {
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

// serialOK reports whether the pipeline may run in the calling goroutine, and sets
// pp.whole. Every message serial sends is at most the links' eager size
// (algos.EagerLimit), so a send never waits for the receiver to take it:
//
//   - When every step is at most the eager size, each step is one message, however many
//     chunks the pipelined path would cut it into (pp.whole). Every rank decides this
//     alike: both sizes are agreed at Init, and every rank's steps cover the same
//     segments. Two goroutines per call cost more than such messages themselves (each
//     hand-off wakes an idle thread of the Go runtime: about a third of an 8-byte
//     AllReduce's CPU time went there, see BENCHMARKS.md, "Speed").
//   - Otherwise steps go in the pipelined path's chunks, on the same message numbers, so
//     a serial rank and a pipelined one understand each other and the choice may be
//     local: serial when the chunk is at most the eager size and this rank's runtime has
//     one P (the launcher's GOMAXPROCS = cores / ranks), where a sender and a receiver
//     goroutine could only take turns on it. Steps that are one chunk each (pp.chunked)
//     are large steps cut up by the algorithm, and are decided so too.
func (pp *pipe) serialOK(sends, recvs []xfer) bool {
	pp.whole = !pp.chunked
	for _, list := range [2][]xfer{sends, recvs} {
		for _, x := range list {
			if len(x.buf) > pp.eager {
				pp.whole = false
			}
		}
	}
	return pp.whole || (pp.cs <= pp.eager && serialLarge(pp.p))
}

// serialLarge reports whether this rank runs steps larger than the eager size serially
// (a variable so that a test can mix serial and pipelined ranks).
var serialLarge = func(algos.Peers) bool { return runtime.GOMAXPROCS(0) == 1 }

// msgSize is the size of serial's messages for a step of n bytes.
func (pp *pipe) msgSize(n int) int {
	if pp.whole {
		return max(n, 1)
	}
	return pp.cs
}

// serialAhead is how many messages serial may send beyond those it has received while
// receives remain. It makes serial deadlock-free at any size: a send may wait only when
// two eager-size messages are unread on its link (the transport.Eager contract), so a
// cycle of W ranks all waiting in a send needs 2W unread messages; a rank that starts a
// send while a receive is ready had sent at most one message more than it received, so
// the links hold at most W. (When no receive is ready, the next one waits for a token of
// the sends themselves, as in ReduceScatter's scratch reuse, and sending is the only way
// on; TestShmRingChunkedSerial covers those schedules.) Steps of one message never get
// that far ahead anyway (each send after the first waits for the receive before it).
const serialAhead = 2

// serial runs the steps in one goroutine, message by message, preferring the next send
// whenever its token is there (and it is not serialAhead ahead) and otherwise taking the
// next receive. Tokens are plain counters here, one per message, as in sender and
// receiver: the k-th wait still matches the k-th signal, and message k on a link is the
// same chunk of the same step at both ends.
func (pp *pipe) serial(ctx context.Context, sends, recvs []xfer) error {
	var fwd, rev, fwdUsed, revUsed int // tokens given and taken, as in run
	si, sc, ri, rc := 0, 0, 0, 0       // next send and receive: step and chunk in it
	sent, got := 0, 0                  // messages so far, which number the tags
	for si < len(sends) || ri < len(recvs) {
		recvReady := ri < len(recvs) && (!recvs[ri].wait || rev > revUsed)
		if si < len(sends) && (!sends[si].wait || fwd > fwdUsed) && (!recvReady || sent-got < serialAhead) {
			x := sends[si]
			size := pp.msgSize(len(x.buf))
			lo, hi := algos.Chunk(len(x.buf), size, sc)
			if x.wait {
				fwdUsed++
			}
			if err := algos.Send(ctx, pp.p, pp.next, algos.Tag(algos.TagRing, pp.phase, sent), x.buf[lo:hi]); err != nil {
				return fmt.Errorf("step %d chunk %d: %w", si, sc, err)
			}
			if x.signal {
				rev++
			}
			sent++
			if sc++; sc == algos.NumChunks(len(x.buf), size) {
				si, sc = si+1, 0
			}
			continue
		}
		if !recvReady {
			// Unreachable for the schedules in ring.go: say so instead of spinning.
			return fmt.Errorf("%w: ring pipeline stalled at send %d/%d, receive %d/%d", transport.ErrInvalid, si, len(sends), ri, len(recvs))
		}
		x := recvs[ri]
		size := pp.msgSize(len(x.buf))
		lo, hi := algos.Chunk(len(x.buf), size, rc)
		if x.wait {
			revUsed++
		}
		t := algos.Tag(algos.TagRing, pp.phase, got)
		if err := pp.recv(ctx, x, t, lo, hi); err != nil {
			return fmt.Errorf("step %d chunk %d: %w", ri, rc, err)
		}
		if x.signal {
			fwd++
		}
		got++
		if rc++; rc == algos.NumChunks(len(x.buf), size) {
			ri, rc = ri+1, 0
		}
	}
	return nil
}

// recv receives bytes [lo, hi) of step x from the previous rank under tag t: reduced
// into x.buf with x.a, copied, or copied past the caches (x.cold).
func (pp *pipe) recv(ctx context.Context, x xfer, t uint32, lo, hi int) error {
	a, buf := pp.a, x.buf[lo:hi]
	var err error
	switch {
	case x.a != nil && x.cold && !(x.finish && a.Op == transport.Avg): // an average's Finish reads the chunk back
		err = algos.RecvReduceCold(ctx, pp.p, pp.prev, t, a.DType, a.Op, buf, x.a[lo:hi])
	case x.a != nil:
		err = algos.RecvReduce(ctx, pp.p, pp.prev, t, a.DType, a.Op, buf, x.a[lo:hi])
	case x.cold:
		err = algos.RecvCold(ctx, pp.p, pp.prev, t, buf)
	default:
		err = algos.Recv(ctx, pp.p, pp.prev, t, buf)
	}
	if err == nil && x.finish {
		err = reduce.Finish(a.DType, a.Op, buf, pp.p.Size())
	}
	if err == nil && x.also != nil {
		streamcopy.Copy(x.also[lo:hi], buf)
	}
	return err
}
