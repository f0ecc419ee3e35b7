package goccl

import "context"

// AllReduceSlice reduces xs in place across all ranks.
func AllReduceSlice[T Number](ctx context.Context, c *Comm, xs []T, op Op) error {
	b := HostSlice(xs)
	return c.AllReduce(ctx, b, b, len(xs), DTypeOf[T](), op)
}

// BroadcastSlice copies root's xs into every rank's xs.
func BroadcastSlice[T Number](ctx context.Context, c *Comm, xs []T, root int) error {
	b := HostSlice(xs)
	return c.Broadcast(ctx, b, b, len(xs), DTypeOf[T](), root)
}

// ReduceSlice reduces send across ranks into root's recv (recv is ignored elsewhere).
func ReduceSlice[T Number](ctx context.Context, c *Comm, send, recv []T, op Op, root int) error {
	return c.Reduce(ctx, HostSlice(send), HostSlice(recv), len(send), DTypeOf[T](), op, root)
}

// AllGatherSlice gathers every rank's send into recv (len(recv) = Size()*len(send)).
func AllGatherSlice[T Number](ctx context.Context, c *Comm, send, recv []T) error {
	return c.AllGather(ctx, HostSlice(send), HostSlice(recv), len(send), DTypeOf[T]())
}

// ReduceScatterSlice reduces send (Size()*len(recv) elements) and leaves this rank's
// block in recv.
func ReduceScatterSlice[T Number](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	return c.ReduceScatter(ctx, HostSlice(send), HostSlice(recv), len(recv), DTypeOf[T](), op)
}

// GatherSlice collects every rank's send into root's recv.
func GatherSlice[T Number](ctx context.Context, c *Comm, send, recv []T, root int) error {
	return c.Gather(ctx, HostSlice(send), HostSlice(recv), len(send), DTypeOf[T](), root)
}

// ScatterSlice sends block r of root's send to rank r's recv.
func ScatterSlice[T Number](ctx context.Context, c *Comm, send, recv []T, root int) error {
	return c.Scatter(ctx, HostSlice(send), HostSlice(recv), len(recv), DTypeOf[T](), root)
}

// AllToAllSlice exchanges blocks of len(send)/Size() elements between all ranks.
func AllToAllSlice[T Number](ctx context.Context, c *Comm, send, recv []T) error {
	n := 0
	if c.Size() > 0 {
		n = len(send) / c.Size()
	}
	return c.AllToAll(ctx, HostSlice(send), HostSlice(recv), n, DTypeOf[T]())
}

// AllToAllVSlice sends block j of send (sendCounts[j] elements, packed in rank order)
// to rank j and packs what each rank sent this one into recv (AllToAllV).
func AllToAllVSlice[T Number](ctx context.Context, c *Comm, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	return c.AllToAllV(ctx, HostSlice(send), sendCounts, HostSlice(recv), recvCounts, DTypeOf[T]())
}
