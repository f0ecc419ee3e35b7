package nccl

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/goccl/goccl/transport"
)

// agreeCounts checks an AllToAllV's counts on every rank at once: each rank gathers
// every rank's send and receive counts (one AllGather of 2W int64 per rank), so every
// rank sees the whole matrix and reaches the same verdict. NCCL cannot tell a send of
// five elements from a receive of four, and ranks that disagreed would wait in the
// grouped calls until the timeout; here every rank fails at once with ErrMismatch,
// naming the pair.
func (e *endpoint) agreeCounts(ctx context.Context, c *transport.Collective) error {
	w := e.local.World
	if len(c.SendCounts) != w || len(c.RecvCounts) != w {
		return fmt.Errorf("nccl: %w: alltoallv with %d send and %d recv counts, need one per rank (%d)",
			transport.ErrInvalid, len(c.SendCounts), len(c.RecvCounts), w)
	}
	mine := make([]byte, 16*w)
	for p := range w {
		binary.LittleEndian.PutUint64(mine[8*p:], uint64(c.SendCounts[p]))
		binary.LittleEndian.PutUint64(mine[8*(w+p):], uint64(c.RecvCounts[p]))
	}
	all := make([]byte, 16*w*w)
	if err := e.Offload(ctx, &transport.Collective{Kind: transport.KindAllGather, Send: transport.HostBuffer(mine),
		Recv: transport.HostBuffer(all), Count: 2 * w, DType: transport.Int64, Root: -1, SendPeer: -1, RecvPeer: -1}); err != nil {
		return fmt.Errorf("nccl: alltoallv: gathering the counts: %w", err)
	}
	at := func(rank, i int) int64 { return int64(binary.LittleEndian.Uint64(all[8*(2*w*rank+i):])) }
	for src := range w {
		for dst := range w {
			if s, r := at(src, dst), at(dst, w+src); s != r {
				return fmt.Errorf("nccl: alltoallv: %w: rank %d sends rank %d %d elements, but rank %d expects %d",
					transport.ErrMismatch, src, dst, s, dst, r)
			}
		}
	}
	return nil
}

// planAllToAllV is plan for an AllToAllV whose counts agreeCounts checked: one send
// and one receive per pair with elements to move, grouped (NCCL's recipe for
// all-to-all). Send memory that the receives may overwrite (the same or overlapping
// device memory) is copied into scratch first, as plan does for AllToAll; host buffers
// are staged apart anyway.
func (e *endpoint) planAllToAllV(c *transport.Collective, dt int) ([]groupOp, []*region, error) {
	w := e.local.World
	esz := c.DType.Size()
	so, ro := make([]int, w+1), make([]int, w+1)
	for p := range w {
		if c.SendCounts[p] < 0 || c.RecvCounts[p] < 0 {
			return nil, nil, fmt.Errorf("nccl: %w: alltoallv count for rank %d is negative (send %d, recv %d)",
				transport.ErrInvalid, p, c.SendCounts[p], c.RecvCounts[p])
		}
		so[p+1], ro[p+1] = so[p]+c.SendCounts[p]*esz, ro[p]+c.RecvCounts[p]*esz
	}
	sendN, recvN := so[w], ro[w]
	var staged []*region
	send, sref, err := e.arg("send", c.Send, sendN, &staged, true)
	if err != nil {
		return nil, nil, err
	}
	if c.Send.Kind() == transport.Device && c.Recv.Kind() == transport.Device && sendN > 0 && recvN > 0 &&
		c.Send.Ptr() < c.Recv.Ptr()+uintptr(recvN) && c.Recv.Ptr() < c.Send.Ptr()+uintptr(sendN) {
		staged = append(staged, &region{devIn: send, devN: sendN})
		send, sref = 0, len(staged)
	}
	recv, rref, err := e.arg("recv", c.Recv, recvN, &staged, false)
	if err != nil {
		return nil, nil, err
	}
	var ops []groupOp
	for p := range w {
		if n := c.SendCounts[p]; n > 0 {
			ops = append(ops, groupOp{kind: opSend, dt: dt, root: p, send: send + uintptr(so[p]), sref: sref, count: n})
		}
		if n := c.RecvCounts[p]; n > 0 {
			ops = append(ops, groupOp{kind: opRecv, dt: dt, root: p, recv: recv + uintptr(ro[p]), rref: rref, count: n})
		}
	}
	return ops, staged, nil
}
