package nccl

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/transport"
)

// Offloads reports the collectives this endpoint runs natively: all of them. AllToAll,
// Gather and Scatter use NCCL's own calls from 2.28 and grouped ncclSend/ncclRecv before.
func (e *endpoint) Offloads(k transport.Kind) bool {
	switch k {
	case transport.KindAllReduce, transport.KindReduce, transport.KindBroadcast, transport.KindAllGather,
		transport.KindReduceScatter, transport.KindAllToAll, transport.KindGather, transport.KindScatter,
		transport.KindBarrier, transport.KindSendRecv, transport.KindAllToAllV:
		return true
	}
	return false
}

// region is one buffer argument as NCCL sees it: a device address, plus the host
// slices to copy in before and out after when the caller passed host memory, or the
// device memory to copy in (devIn, devN) for an argument that must not alias another.
type region struct {
	ptr     uintptr
	copyIn  []byte
	copyOut []byte
	devIn   uintptr
	devN    int
}

func (r *region) size() int { return max(len(r.copyIn), len(r.copyOut), r.devN) }

// Offload runs c on the communicator over all ranks. Device buffers go to NCCL as they
// are (they must be on this rank's GPU); host buffers are staged through device memory.
func (e *endpoint) Offload(ctx context.Context, c *transport.Collective) error {
	if c.Kind == transport.KindAllToAllV {
		if err := e.agreeCounts(ctx, c); err != nil {
			return err
		}
	}
	ops, staged, err := e.plan(c)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	main, err := e.mainComm(ctx)
	if err != nil {
		return err
	}
	e.scratch.mu.Lock()
	defer e.scratch.mu.Unlock()
	if err := e.placeHost(staged); err != nil {
		return fmt.Errorf("nccl: %s: %w", c.Kind, err)
	}
	for _, r := range staged {
		var err error
		if r.devN > 0 {
			err = e.dev.CopyDtoD(r.ptr, r.devIn, r.devN)
		} else {
			err = e.dev.CopyHtoD(r.ptr, r.copyIn)
		}
		if err != nil {
			return fmt.Errorf("nccl: %s: stage in: %w", c.Kind, err)
		}
	}
	for i := range ops {
		if r := ops[i].sref; r > 0 {
			ops[i].send += staged[r-1].ptr
		}
		if r := ops[i].rref; r > 0 {
			ops[i].recv += staged[r-1].ptr
		}
	}
	if err := main.run(ctx, fmt.Sprintf("%s %s count=%d", c.Kind, c.DType, c.Count), ops); err != nil {
		return err
	}
	for _, r := range staged {
		if err := e.dev.CopyDtoH(r.copyOut, r.ptr); err != nil {
			return fmt.Errorf("nccl: %s: stage out: %w", c.Kind, err)
		}
	}
	return nil
}

func (e *endpoint) placeHost(staged []*region) error {
	total := 0
	for _, r := range staged {
		total += alignUp(r.size())
	}
	if total == 0 && len(staged) == 0 {
		return nil
	}
	base, err := e.scratch.get(e.dev, total)
	if err != nil {
		return err
	}
	off := 0
	for _, r := range staged {
		r.ptr = base + uintptr(off)
		off += alignUp(r.size())
	}
	return nil
}

func alignUp(n int) int { return (n + 255) &^ 255 }

// plan validates c and turns it into NCCL calls. Host buffers become placeholder
// addresses into staged.
func (e *endpoint) plan(c *transport.Collective) ([]groupOp, []*region, error) {
	w, me := e.local.World, e.local.Rank
	if c.Kind == transport.KindBarrier {
		// A one-element allreduce: every rank must arrive before any leaves.
		r := &region{copyIn: make([]byte, 4), copyOut: make([]byte, 4)}
		return []groupOp{{kind: opAllReduce, dt: ncclInt32, op: ncclSum, sref: 1, rref: 1, count: 1}}, []*region{r}, nil
	}
	if c.Count < 0 {
		return nil, nil, fmt.Errorf("nccl: %w: %s count %d is negative", transport.ErrInvalid, c.Kind, c.Count)
	}
	dt, err := dataType(c.DType, e.lib.Version())
	if err != nil {
		return nil, nil, err
	}
	op := 0
	if c.Kind == transport.KindAllReduce || c.Kind == transport.KindReduce || c.Kind == transport.KindReduceScatter {
		if op, err = redOp(c.Op, e.lib.Version()); err != nil {
			return nil, nil, err
		}
	}
	rooted := c.Kind == transport.KindReduce || c.Kind == transport.KindBroadcast || c.Kind == transport.KindGather || c.Kind == transport.KindScatter
	if rooted && (c.Root < 0 || c.Root >= w) {
		return nil, nil, fmt.Errorf("nccl: %w: %s root %d outside 0..%d", transport.ErrInvalid, c.Kind, c.Root, w-1)
	}
	if c.Kind == transport.KindAllToAllV {
		return e.planAllToAllV(c, dt)
	}
	if c.Count == 0 {
		return nil, nil, nil
	}
	cb := c.Count * c.DType.Size()
	isRoot := rooted && c.Root == me
	// Bytes each buffer must hold on this rank (0 = not used here), NCCL's counting.
	sendN, recvN := cb, cb
	switch c.Kind {
	case transport.KindAllReduce:
	case transport.KindReduce:
		recvN = pick(isRoot, cb)
	case transport.KindBroadcast:
		sendN = pick(isRoot, cb)
	case transport.KindAllGather:
		recvN = w * cb
	case transport.KindReduceScatter:
		sendN = w * cb
	case transport.KindAllToAll:
		sendN, recvN = w*cb, w*cb
	case transport.KindGather:
		recvN = pick(isRoot, w*cb)
	case transport.KindScatter:
		sendN = pick(isRoot, w*cb)
	case transport.KindSendRecv:
		if c.SendPeer >= w || c.RecvPeer >= w || (c.SendPeer < 0 && c.RecvPeer < 0) {
			return nil, nil, fmt.Errorf("nccl: %w: sendrecv peers send=%d recv=%d, valid 0..%d (or -1 for none, not both)",
				transport.ErrInvalid, c.SendPeer, c.RecvPeer, w-1)
		}
		sendN, recvN = pick(c.SendPeer >= 0, cb), pick(c.RecvPeer >= 0, cb)
	default:
		return nil, nil, fmt.Errorf("nccl: %w: cannot offload %s", transport.ErrNotSupported, c.Kind)
	}
	var staged []*region
	// AllToAll in place would have NCCL receive block p while it still sends block p
	// (the block this rank sends to p is where p's block lands): the pipelined copies
	// then overwrite data not yet sent (seen on an H200 from 8 MiB at 2 ranks). So its
	// send side is always a copy: host buffers are staged apart, a device buffer is
	// copied into scratch first.
	inPlace := transport.Same(c.Send, c.Recv) && sendN > 0 && recvN > 0
	inPlaceHost := inPlace && c.Send.Kind() == transport.Host && c.Recv.Kind() == transport.Host && c.Kind != transport.KindAllToAll
	send, sref, err := e.arg("send", c.Send, sendN, &staged, true)
	if err != nil {
		return nil, nil, err
	}
	if inPlace && c.Kind == transport.KindAllToAll && c.Send.Kind() == transport.Device {
		staged = append(staged, &region{devIn: send, devN: sendN})
		send, sref = 0, len(staged)
	}
	var recv uintptr
	var rref int
	if inPlaceHost && sendN == recvN {
		staged[sref-1].copyOut = c.Recv.Bytes()[:recvN]
		rref = sref
	} else if recv, rref, err = e.arg("recv", c.Recv, recvN, &staged, false); err != nil {
		return nil, nil, err
	}
	g := groupOp{dt: dt, op: op, root: c.Root, send: send, recv: recv, sref: sref, rref: rref, count: c.Count}
	native := e.lib.f.allToAll != 0 && e.lib.f.gather != 0 && e.lib.f.scatter != 0
	switch c.Kind {
	case transport.KindAllReduce:
		g.kind = opAllReduce
	case transport.KindReduce:
		g.kind = opReduce
	case transport.KindBroadcast:
		g.kind = opBroadcast
	case transport.KindAllGather:
		g.kind = opAllGather
	case transport.KindReduceScatter:
		g.kind = opReduceScatter
	case transport.KindAllToAll, transport.KindGather, transport.KindScatter:
		if native {
			g.kind = map[transport.Kind]int{transport.KindAllToAll: opAllToAll, transport.KindGather: opGather, transport.KindScatter: opScatter}[c.Kind]
			break
		}
		return p2pPlan(c.Kind, g, w, me, cb), staged, nil
	case transport.KindSendRecv:
		var ops []groupOp
		if c.SendPeer >= 0 {
			ops = append(ops, groupOp{kind: opSend, dt: dt, root: c.SendPeer, send: send, sref: sref, count: c.Count})
		}
		if c.RecvPeer >= 0 {
			ops = append(ops, groupOp{kind: opRecv, dt: dt, root: c.RecvPeer, recv: recv, rref: rref, count: c.Count})
		}
		return ops, staged, nil
	}
	return []groupOp{g}, staged, nil
}

func pick(use bool, n int) int {
	if use {
		return n
	}
	return 0
}

// p2pPlan expresses AllToAll, Gather and Scatter as grouped sends and receives (NCCL's
// documented recipe for libraries before 2.28). For staged host buffers send and recv
// are offsets into the region, so adding the per-peer offset works for both kinds.
func p2pPlan(kind transport.Kind, g groupOp, w, me, cb int) []groupOp {
	var ops []groupOp
	at := func(base uintptr, i int) uintptr { return base + uintptr(i*cb) }
	for p := 0; p < w; p++ {
		switch kind {
		case transport.KindAllToAll:
			ops = append(ops, groupOp{kind: opSend, dt: g.dt, root: p, send: at(g.send, p), sref: g.sref, count: g.count},
				groupOp{kind: opRecv, dt: g.dt, root: p, recv: at(g.recv, p), rref: g.rref, count: g.count})
		case transport.KindGather:
			if me == g.root {
				ops = append(ops, groupOp{kind: opRecv, dt: g.dt, root: p, recv: at(g.recv, p), rref: g.rref, count: g.count})
			}
		case transport.KindScatter:
			if me == g.root {
				ops = append(ops, groupOp{kind: opSend, dt: g.dt, root: p, send: at(g.send, p), sref: g.sref, count: g.count})
			}
		}
	}
	switch kind {
	case transport.KindGather:
		ops = append(ops, groupOp{kind: opSend, dt: g.dt, root: g.root, send: g.send, sref: g.sref, count: g.count})
	case transport.KindScatter:
		ops = append(ops, groupOp{kind: opRecv, dt: g.dt, root: g.root, recv: g.recv, rref: g.rref, count: g.count})
	}
	return ops
}

// arg checks one buffer argument and returns its device address, or for a host buffer
// offset 0 and its 1-based index in staged.
func (e *endpoint) arg(name string, b transport.Buffer, need int, staged *[]*region, in bool) (uintptr, int, error) {
	if need == 0 {
		return 0, 0, nil
	}
	if b.Len() < need {
		return 0, 0, fmt.Errorf("nccl: %w: %s buffer on rank %d is %d bytes, the collective needs %d",
			transport.ErrInvalid, name, e.local.Rank, b.Len(), need)
	}
	if b.Kind() == transport.Device {
		if b.DeviceOrdinal() != e.dev.Ordinal() {
			return 0, 0, fmt.Errorf("nccl: %w: %s buffer is on cuda device %d but rank %d's communicator is on device %d",
				transport.ErrInvalid, name, b.DeviceOrdinal(), e.local.Rank, e.dev.Ordinal())
		}
		return b.Ptr(), 0, nil
	}
	r := &region{}
	if in {
		r.copyIn = b.Bytes()[:need]
	} else {
		r.copyOut = b.Bytes()[:need]
	}
	*staged = append(*staged, r)
	return 0, len(*staged), nil
}
