package goccl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/goccl/goccl/transport"
)

// watchPeriod is how often a rank publishes how far it got. It costs one store write
// per period, and only when the rank made progress.
const watchPeriod = 500 * time.Millisecond

// desyncFirst is how long a collective runs before this rank compares it with what its
// peers published (three publishing periods, so that peers that entered the same
// operation at about the same time have published it). Later checks follow at a
// quarter of the time blocked so far, at least a second apart.
const desyncFirst = 3 * watchPeriod

// progressRec is the collective a rank started last: its sequence number and
// fingerprint, published to the store as "seq kind dtype op count root".
type progressRec struct {
	seq uint64
	fp  transport.Fingerprint
	gen uint64 // the operation (opGen) that runs it, to tell it from a later one
}

func (p progressRec) encode() string {
	return fmt.Sprintf("%d %d %d %d %d %d", p.seq, p.fp.Kind, p.fp.DType, p.fp.Op, p.fp.Count, p.fp.Root)
}

func decodeProgress(b []byte) (progressRec, error) {
	var p progressRec
	var kind, dt, op uint8
	_, err := fmt.Sscanf(string(b), "%d %d %d %d %d %d", &p.seq, &kind, &dt, &op, &p.fp.Count, &p.fp.Root)
	p.fp.Kind, p.fp.DType, p.fp.Op = transport.Kind(kind), transport.DType(dt), transport.Op(op)
	return p, err
}

// getProgress is the collective started last (opStart records it).
func (c *Comm) getProgress() progressRec {
	c.lock()
	defer c.mu.Unlock()
	return c.prog
}

// desyncError is a collective mismatch found by comparing the ranks' published progress:
// two ranks blocked in operations with the same sequence number but different
// fingerprints. It catches what the messages cannot show, a pair of ranks each waiting
// for the other (a broadcast receiver against a reduction root that waits for its
// input), as PyTorch's desync debugging does.
type desyncError struct {
	rank, peer   int
	host         string
	seq          uint64
	mine, theirs transport.Fingerprint
}

func (e *desyncError) Error() string {
	return fmt.Sprintf("collective mismatch: rank %d is in op #%d (%s) but rank %d (host %s) is in op #%d (%s); "+
		"found by comparing the operations the ranks published while blocked", e.rank, e.seq, e.mine, e.peer, e.host, e.seq, e.theirs)
}

func (e *desyncError) Unwrap() error { return transport.ErrMismatch }

// watchdog publishes this rank's progress (the collective it started last) to the
// store, so that when an operation hangs every rank can tell which peer never reached
// it or reached a different one; it cancels an operation that runs past its deadline,
// and one that is blocked while a peer is in a different collective of the same number.
func (c *Comm) watchdog() {
	defer close(c.watchDone)
	period := deadlinePeriod(c.cfg.Timeout)
	t := time.NewTicker(period)
	defer t.Stop()
	lastPublish := time.Now()
	var last uint64
	publish := func() {
		p := c.getProgress()
		if p.seq == last {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), watchPeriod)
		if c.store.Set(ctx, "progress/"+strconv.Itoa(c.rank), []byte(p.encode())) == nil {
			last = p.seq
		}
		cancel()
	}
	c.store.Set(context.Background(), "progress/"+strconv.Itoa(c.rank), []byte(progressRec{}.encode()))
	var checkGen uint64
	var checkAt time.Time
	for {
		select {
		case now := <-t.C:
			c.checkDeadline(now)
			if now.Sub(lastPublish) >= watchPeriod-period/2 {
				publish()
				lastPublish = now
			}
			gen, running, started := c.runningOp()
			if !running || c.size == 1 {
				continue
			}
			if gen != checkGen {
				checkGen, checkAt = gen, started.Add(desyncFirst)
			}
			if now.After(checkAt) {
				p := c.getProgress()
				if p.gen == gen {
					c.checkDesync(gen, p)
				}
				c.checkFailed(gen, p)
				checkAt = now.Add(max(time.Second, now.Sub(started)/4))
			}
		case <-c.watchStop:
			return
		}
	}
}

// runningOp reports the running operation's number and start.
func (c *Comm) runningOp() (gen uint64, running bool, started time.Time) {
	c.lock()
	defer c.mu.Unlock()
	return c.opGen, c.opRunning, monoTime(c.opStarted)
}

// checkDesync cancels operation gen (collective p) when a peer is in a different
// collective with the same sequence number.
func (c *Comm) checkDesync(gen uint64, p progressRec) {
	for peer, rec := range c.peerProgress() {
		if rec == nil || rec.seq != p.seq || rec.fp == p.fp {
			continue
		}
		c.cancelRunning(gen, &desyncError{rank: c.rank, peer: peer, host: c.PeerHost(peer), seq: p.seq, mine: p.fp, theirs: rec.fp})
		return
	}
}

// checkFailed cancels operation gen when another rank has recorded a failure of the
// communicator in the store (agreeCause: a communicator fails only once, and then on
// every rank). Its abort frame (abortPeers) reaches a rank that receives from it; this
// finds a rank that cannot read it, such as one blocked in a send to the failed rank
// on a link that rank no longer drains, which would otherwise wait for the deadline.
// p is the collective started last; when it is not gen, gen is a SendRecv.
func (c *Comm) checkFailed(gen uint64, p progressRec) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if n, err := c.store.Add(ctx, "fail/n", 0); err != nil || n == 0 {
		return
	}
	b, err := c.store.Get(ctx, "fail/who")
	if err != nil {
		return
	}
	var code uint64
	var who, origin int
	if _, err := fmt.Sscanf(string(b), "%d %d %d", &code, &who, &origin); err != nil || abortNames[code] == "" || origin == c.rank {
		return
	}
	hdr := transport.Header{Seq: p.seq, Fp: p.fp}
	if p.gen != gen {
		hdr = transport.Header{Fp: transport.Fingerprint{Kind: transport.KindSendRecv}}
	}
	c.cancelRunning(gen, &remoteAbort{rank: c.rank, origin: origin, implicate: who, code: code, hdr: hdr, c: c})
}

// failedCause returns the failure of another rank that cancelled the operation
// running under ctx (checkFailed).
func failedCause(ctx context.Context) (*remoteAbort, bool) {
	ra, ok := context.Cause(ctx).(*remoteAbort)
	return ra, ok
}

// desyncCause returns the desync error that cancelled the operation running under ctx.
func desyncCause(ctx context.Context) (*desyncError, bool) {
	var de *desyncError
	ok := errors.As(context.Cause(ctx), &de)
	return de, ok
}

// peerProgress reads every peer's published progress (nil where it cannot be read), in
// parallel and bounded to a fraction of a second.
func (c *Comm) peerProgress() []*progressRec {
	out := make([]*progressRec, c.size)
	var wg sync.WaitGroup
	for p := range c.size {
		if p == c.rank {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			b, err := c.store.Get(ctx, "progress/"+strconv.Itoa(p))
			if err != nil {
				return
			}
			if rec, err := decodeProgress(b); err == nil {
				out[p] = &rec
			}
		})
	}
	wg.Wait()
	return out
}

// behind returns the peers whose last published progress is before op seq: the ranks
// that have not called it (or died before it).
func (c *Comm) behind(seq uint64) []string {
	if c.size == 1 || seq == 0 {
		return nil
	}
	var res []string
	for p, rec := range c.peerProgress() {
		if rec != nil && rec.seq < seq {
			res = append(res, fmt.Sprintf("rank %d (host %s) has only started %d collectives; it never called #%d", p, c.PeerHost(p), rec.seq, seq))
		}
	}
	return res
}
