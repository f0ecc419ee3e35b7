package goccl

import (
	"cmp"
	"context"
	"fmt"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// Send sends count elements of buf to peer, which must call Recv (or SendRecv) with the
// same count and dtype. Like every operation it runs in issue order on this rank, so two
// ranks that each Send before they Recv large messages should use SendRecv instead.
func (c *Comm) Send(ctx context.Context, buf Buffer, count int, dt DType, peer int) error {
	return c.SendRecv(ctx, buf, peer, Host(nil), -1, count, dt)
}

// SendAsync queues a Send.
func (c *Comm) SendAsync(ctx context.Context, buf Buffer, count int, dt DType, peer int) *Work {
	return c.SendRecvAsync(ctx, buf, peer, Host(nil), -1, count, dt)
}

// Recv receives count elements from peer into buf.
func (c *Comm) Recv(ctx context.Context, buf Buffer, count int, dt DType, peer int) error {
	return c.SendRecv(ctx, Host(nil), -1, buf, peer, count, dt)
}

// RecvAsync queues a Recv.
func (c *Comm) RecvAsync(ctx context.Context, buf Buffer, count int, dt DType, peer int) *Work {
	return c.SendRecvAsync(ctx, Host(nil), -1, buf, peer, count, dt)
}

// SendRecv sends count elements of send to sendPeer while receiving count elements
// from recvPeer into recv, concurrently (a ring shift, a pairwise exchange). A peer of
// -1 skips that half. send and recv may be the same memory: what goes out is the data
// from before the call.
func (c *Comm) SendRecv(ctx context.Context, send Buffer, sendPeer int, recv Buffer, recvPeer int, count int, dt DType) error {
	return c.runSync(ctx, &opSpec{coll: p2pCall(send, sendPeer, recv, recvPeer, count, dt)})
}

// SendRecvAsync queues a SendRecv.
func (c *Comm) SendRecvAsync(ctx context.Context, send Buffer, sendPeer int, recv Buffer, recvPeer int, count int, dt DType) *Work {
	return c.collective(ctx, p2pCall(send, sendPeer, recv, recvPeer, count, dt))
}

// p2pCall is a SendRecv as a call: run like a collective, with its own message sequence
// per peer (runP2P), and with nothing allocated for it.
func p2pCall(send Buffer, sendPeer int, recv Buffer, recvPeer int, count int, dt DType) call {
	return call{kind: KindSendRecv, send: send, recv: recv, count: count, dt: dt, root: -1, to: sendPeer, from: recvPeer}
}

// runP2P runs op, a SendRecv (p2pCall), whose fingerprint prepare computed.
func (c *Comm) runP2P(ctx context.Context, op *opSpec) error {
	k, fp := &op.coll, op.fp
	send, sendPeer, recv, recvPeer, count, dt := k.send, k.to, k.recv, k.from, k.count, k.dt
	if err := c.checkP2P(send, sendPeer, recv, recvPeer, count, dt); err != nil {
		return err
	}
	n := count * dt.Size()
	sb, rb, finish, err := c.hostBuffers(ctx, send, recv)
	if err != nil {
		return fmt.Errorf("goccl: rank %d: sendrecv: %w", c.rank, err)
	}
	var serr, rerr error
	var h transport.Header
	sent := false // by TrySend, before the receive
	if sendPeer >= 0 {
		c.sendSeq[sendPeer]++
		h = transport.Header{Seq: c.sendSeq[sendPeer], Fp: fp}
		// A message the link takes at once (transport.TrySender: over shm up to 2 KiB, tcp 16 KiB)
		// has left before the receive begins: the receive then runs on this goroutine,
		// and an in-place call needs no copy of what goes out.
		sent = c.trySend(sendPeer, h, sb[:n])
	}
	if !sent && sendPeer >= 0 && recvPeer >= 0 && n > 0 && !algos.Apart(sb[:n], rb[:n]) {
		// In place: what goes out must be the data from before the receive lands.
		tmp := algos.GetScratch(n)
		defer algos.PutScratch(tmp)
		copy(tmp, sb[:n])
		sb = tmp
	}
	var r p2pRecv
	if recvPeer >= 0 {
		c.recvSeq[recvPeer]++
		r = p2pRecv{ctx: ctx, conn: c.links[recvPeer], h: transport.Header{Seq: c.recvSeq[recvPeer], Fp: fp}, buf: rb[:n]}
	}
	var done chan error
	if recvPeer >= 0 && sendPeer >= 0 && !sent {
		// The receive runs beside the send, as either may wait for the other rank's side,
		// and the send on the calling goroutine, so that its message leaves at once.
		done = c.p2p.start(r)
	}
	if sendPeer >= 0 && !sent {
		if serr = c.links[sendPeer].Send(ctx, h, sb[:n]); serr != nil {
			serr = fmt.Errorf("goccl: rank %d: send to rank %d: %w", c.rank, sendPeer, serr)
		}
	}
	switch {
	case done != nil:
		rerr = <-done
	case recvPeer >= 0:
		rerr = r.conn.Recv(r.ctx, r.h, r.buf)
	}
	if rerr != nil {
		rerr = fmt.Errorf("goccl: rank %d: recv from rank %d: %w", c.rank, recvPeer, rerr)
	}
	err = cmp.Or(rerr, serr)
	if err != nil {
		finish(false)
		return err
	}
	return finish(true)
}

// trySend sends p to peer if the link takes it at once (transport.TrySender), counted
// by the link's observer as its Send would be, and wakes the peer. It reports false,
// and sends nothing, for a link without TrySend, a message it does not take now, and a
// traced communicator (whose sends are spans); Send then sends it, or says what is wrong.
func (c *Comm) trySend(peer int, h transport.Header, p []byte) bool {
	o := c.obsLink(peer)
	if o == nil || o.try == nil || c.tracer != nil {
		return false
	}
	if sent, err := o.try.TrySend(h, p); err != nil || !sent {
		return false
	}
	o.state.sent.Add(uint64(len(p)))
	o.try.Flush()
	return true
}

func (c *Comm) checkP2P(send Buffer, sendPeer int, recv Buffer, recvPeer int, count int, dt DType) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("goccl: rank %d: sendrecv: %w: %s", c.rank, transport.ErrInvalid, fmt.Sprintf(format, a...))
	}
	switch {
	case !dt.Valid():
		return bad("unknown dtype %d", dt)
	case count < 0:
		return bad("negative count %d", count)
	case sendPeer < -1 || sendPeer >= c.size || sendPeer == c.rank:
		return bad("send peer %d is not another rank (valid: 0..%d except %d, or -1 for none)", sendPeer, c.size-1, c.rank)
	case recvPeer < -1 || recvPeer >= c.size || recvPeer == c.rank:
		return bad("recv peer %d is not another rank (valid: 0..%d except %d, or -1 for none)", recvPeer, c.size-1, c.rank)
	case sendPeer >= 0 && send.Len() < count*dt.Size():
		return bad("send buffer is %d bytes, need %d (count %d x %d-byte %s)", send.Len(), count*dt.Size(), count, dt.Size(), dt)
	case recvPeer >= 0 && recv.Len() < count*dt.Size():
		return bad("recv buffer is %d bytes, need %d (count %d x %d-byte %s)", recv.Len(), count*dt.Size(), count, dt.Size(), dt)
	}
	return nil
}

// opName names an operation for the flight recorder and traces: its fingerprint, and a
// SendRecv's peers.
func opName(fp transport.Fingerprint, to, from int) string {
	if fp.Kind != KindSendRecv {
		return fp.String()
	}
	return fmt.Sprintf("%s to %d from %d", fp, to, from)
}

// p2pRecv is the receive of a point-to-point call.
type p2pRecv struct {
	ctx  context.Context
	conn transport.Conn
	h    transport.Header
	buf  []byte
}

// p2pHelper is a goroutine, started by the first SendRecv that both sends and
// receives, that runs such calls' receives while the caller sends. One that lives
// from call to call keeps the stack its receive grew: a goroutine per call grew a
// fresh stack every time, and with the send on it, a rank with one core spun in its
// receive before its own send had left (SendRecv of 8 bytes over shm: 6 us a call,
// where an AllReduce takes 0.5; BENCHMARKS.md, "Speed", 33c). Used under execMu.
type p2pHelper struct {
	req     chan p2pRecv
	done    chan error
	stopped chan struct{}
}

// start hands r to the helper (starting it the first time) and returns the channel
// its error arrives on.
func (h *p2pHelper) start(r p2pRecv) chan error {
	if h.req == nil {
		h.req, h.done, h.stopped = make(chan p2pRecv, 1), make(chan error, 1), make(chan struct{})
		go func() {
			defer close(h.stopped)
			for r := range h.req {
				h.done <- r.conn.Recv(r.ctx, r.h, r.buf)
			}
		}()
	}
	h.req <- r
	return h.done
}

// stop ends the helper, if it started, once no call uses it (Close, under execMu).
func (h *p2pHelper) stop() {
	if h.req != nil {
		close(h.req)
		<-h.stopped
		h.req = nil
	}
}
