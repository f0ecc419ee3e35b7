package goccl

import (
	"context"
)

// AllReduce reduces count elements of send across all ranks with op and leaves the
// result in every rank's recv. send and recv may be the same memory (in place).
func (c *Comm) AllReduce(ctx context.Context, send, recv Buffer, count int, dt DType, op Op) error {
	return c.runSync(ctx, &opSpec{coll: call{kind: KindAllReduce, send: send, recv: recv, count: count, dt: dt, op: op, root: -1}})
}

// AllReduceAsync queues an AllReduce and returns at once.
func (c *Comm) AllReduceAsync(ctx context.Context, send, recv Buffer, count int, dt DType, op Op) *Work {
	return c.collective(ctx, call{kind: KindAllReduce, send: send, recv: recv, count: count, dt: dt, op: op, root: -1})
}

// Reduce reduces count elements of send across ranks into root's recv (recv is only
// used on root).
func (c *Comm) Reduce(ctx context.Context, send, recv Buffer, count int, dt DType, op Op, root int) error {
	return c.runSync(ctx, &opSpec{coll: call{kind: KindReduce, send: send, recv: recv, count: count, dt: dt, op: op, root: root}})
}

// ReduceAsync queues a Reduce.
func (c *Comm) ReduceAsync(ctx context.Context, send, recv Buffer, count int, dt DType, op Op, root int) *Work {
	return c.collective(ctx, call{kind: KindReduce, send: send, recv: recv, count: count, dt: dt, op: op, root: root})
}

// Broadcast copies count elements of root's send into every rank's recv (send is only
// read on root; send == recv is the in-place form).
func (c *Comm) Broadcast(ctx context.Context, send, recv Buffer, count int, dt DType, root int) error {
	return c.runSync(ctx, &opSpec{coll: call{kind: KindBroadcast, send: send, recv: recv, count: count, dt: dt, root: root}})
}

// BroadcastAsync queues a Broadcast.
func (c *Comm) BroadcastAsync(ctx context.Context, send, recv Buffer, count int, dt DType, root int) *Work {
	return c.collective(ctx, call{kind: KindBroadcast, send: send, recv: recv, count: count, dt: dt, root: root})
}

// AllGather gathers count elements from every rank into every rank's recv, rank r's
// block at offset r*count. In place when send is recv's block for this rank.
func (c *Comm) AllGather(ctx context.Context, send, recv Buffer, count int, dt DType) error {
	return c.runSync(ctx, &opSpec{coll: call{kind: KindAllGather, send: send, recv: recv, count: count, dt: dt, root: -1}})
}

// AllGatherAsync queues an AllGather.
func (c *Comm) AllGatherAsync(ctx context.Context, send, recv Buffer, count int, dt DType) *Work {
	return c.collective(ctx, call{kind: KindAllGather, send: send, recv: recv, count: count, dt: dt, root: -1})
}

// ReduceScatter reduces Size()*count elements of send across ranks and leaves block r
// (count elements) in rank r's recv. In place when recv is send's block for this rank.
func (c *Comm) ReduceScatter(ctx context.Context, send, recv Buffer, count int, dt DType, op Op) error {
	return c.runSync(ctx, &opSpec{coll: call{kind: KindReduceScatter, send: send, recv: recv, count: count, dt: dt, op: op, root: -1}})
}

// ReduceScatterAsync queues a ReduceScatter.
func (c *Comm) ReduceScatterAsync(ctx context.Context, send, recv Buffer, count int, dt DType, op Op) *Work {
	return c.collective(ctx, call{kind: KindReduceScatter, send: send, recv: recv, count: count, dt: dt, op: op, root: -1})
}

// Gather collects count elements from every rank into root's recv (Size()*count
// elements, rank r's block at r*count).
func (c *Comm) Gather(ctx context.Context, send, recv Buffer, count int, dt DType, root int) error {
	return c.runSync(ctx, &opSpec{coll: call{kind: KindGather, send: send, recv: recv, count: count, dt: dt, root: root}})
}

// GatherAsync queues a Gather.
func (c *Comm) GatherAsync(ctx context.Context, send, recv Buffer, count int, dt DType, root int) *Work {
	return c.collective(ctx, call{kind: KindGather, send: send, recv: recv, count: count, dt: dt, root: root})
}

// Scatter sends block r (count elements) of root's send to rank r's recv.
func (c *Comm) Scatter(ctx context.Context, send, recv Buffer, count int, dt DType, root int) error {
	return c.runSync(ctx, &opSpec{coll: call{kind: KindScatter, send: send, recv: recv, count: count, dt: dt, root: root}})
}

// ScatterAsync queues a Scatter.
func (c *Comm) ScatterAsync(ctx context.Context, send, recv Buffer, count int, dt DType, root int) *Work {
	return c.collective(ctx, call{kind: KindScatter, send: send, recv: recv, count: count, dt: dt, root: root})
}

// AllToAll sends block p (count elements) of send to rank p, which stores it as block
// r of its recv. Both buffers hold Size()*count elements; in place is not supported.
func (c *Comm) AllToAll(ctx context.Context, send, recv Buffer, count int, dt DType) error {
	return c.runSync(ctx, &opSpec{coll: call{kind: KindAllToAll, send: send, recv: recv, count: count, dt: dt, root: -1}})
}

// AllToAllAsync queues an AllToAll.
func (c *Comm) AllToAllAsync(ctx context.Context, send, recv Buffer, count int, dt DType) *Work {
	return c.collective(ctx, call{kind: KindAllToAll, send: send, recv: recv, count: count, dt: dt, root: -1})
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier(ctx context.Context) error {
	return c.runSync(ctx, &opSpec{coll: call{kind: KindBarrier, send: Host(nil), recv: Host(nil), dt: Uint8, root: -1}})
}

// BarrierAsync queues a Barrier.
func (c *Comm) BarrierAsync(ctx context.Context) *Work {
	return c.collective(ctx, call{kind: KindBarrier, send: Host(nil), recv: Host(nil), dt: Uint8, root: -1})
}
