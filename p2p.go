package goccl

import (
	"context"
	"fmt"
	"unsafe"

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
// -1 skips that half.
func (c *Comm) SendRecv(ctx context.Context, send Buffer, sendPeer int, recv Buffer, recvPeer int, count int, dt DType) error {
	return c.runSync(ctx, &opSpec{desc: p2pDesc{dt, count, sendPeer, recvPeer}, bytes: count * dt.Size(), run: func(ctx context.Context, w *Work) error {
		w.algo = "p2p"
		return c.runP2P(ctx, send, sendPeer, recv, recvPeer, count, dt)
	}})
}

// SendRecvAsync queues a SendRecv.
func (c *Comm) SendRecvAsync(ctx context.Context, send Buffer, sendPeer int, recv Buffer, recvPeer int, count int, dt DType) *Work {
	return c.submit(&Work{ctx: ctx, opSpec: opSpec{desc: p2pDesc{dt, count, sendPeer, recvPeer}, bytes: count * dt.Size(), run: func(ctx context.Context, w *Work) error {
		w.algo = "p2p"
		return c.runP2P(ctx, send, sendPeer, recv, recvPeer, count, dt)
	}}})
}

func (c *Comm) runP2P(ctx context.Context, send Buffer, sendPeer int, recv Buffer, recvPeer int, count int, dt DType) error {
	fp := transport.Fingerprint{Kind: KindSendRecv, DType: dt, Count: uint64(count), Root: -1}
	if err := c.checkP2P(send, sendPeer, recv, recvPeer, count, dt); err != nil {
		return err
	}
	n := count * dt.Size()
	sb, rb, finish, err := c.hostBuffers(ctx, send, recv)
	if err != nil {
		return fmt.Errorf("goccl: rank %d: sendrecv: %w", c.rank, err)
	}
	if sendPeer >= 0 && recvPeer >= 0 && n > 0 && overlaps(sb[:n], rb[:n]) {
		// In place: what goes out must be the data from before the receive lands.
		sb = append([]byte(nil), sb[:n]...)
	}
	errc := make(chan error, 1)
	if sendPeer >= 0 {
		c.sendSeq[sendPeer]++
		h := transport.Header{Seq: c.sendSeq[sendPeer], Fp: fp}
		go func() {
			if err := c.links[sendPeer].Send(ctx, h, sb[:n]); err != nil {
				errc <- fmt.Errorf("goccl: rank %d: send to rank %d: %w", c.rank, sendPeer, err)
				return
			}
			errc <- nil
		}()
	} else {
		errc <- nil
	}
	var rerr error
	if recvPeer >= 0 {
		c.recvSeq[recvPeer]++
		h := transport.Header{Seq: c.recvSeq[recvPeer], Fp: fp}
		if err := c.links[recvPeer].Recv(ctx, h, rb[:n]); err != nil {
			rerr = fmt.Errorf("goccl: rank %d: recv from rank %d: %w", c.rank, recvPeer, err)
		}
	}
	serr := <-errc
	if rerr == nil {
		rerr = serr
	}
	if rerr != nil {
		finish(false)
		return rerr
	}
	return finish(true)
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

// overlaps reports whether two non-empty byte slices share memory.
func overlaps(a, b []byte) bool {
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

type p2pDesc struct {
	dt             DType
	count, to, frm int
}

func (d p2pDesc) String() string {
	return fmt.Sprintf("sendrecv %s count=%d to %d from %d", d.dt, d.count, d.to, d.frm)
}
