package dp

import (
	"context"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/transport"
)

// Comm adapts a goccl communicator to Collectives.
func Comm(c *goccl.Comm) Collectives { return gocclComm{c} }

type gocclComm struct{ c *goccl.Comm }

func (g gocclComm) Rank() int { return g.c.Rank() }
func (g gocclComm) Size() int { return g.c.Size() }

func (g gocclComm) AllReduce(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) Pending {
	return g.c.AllReduceAsync(ctx, send, recv, count, dt, op)
}

func (g gocclComm) ReduceScatter(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) Pending {
	return g.c.ReduceScatterAsync(ctx, send, recv, count, dt, op)
}

func (g gocclComm) AllGather(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType) Pending {
	return g.c.AllGatherAsync(ctx, send, recv, count, dt)
}

func (g gocclComm) Broadcast(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, root int) Pending {
	return g.c.BroadcastAsync(ctx, send, recv, count, dt, root)
}

// AllocShared and FreeShared make the adapter a SharedAllocator.
func (g gocclComm) AllocShared(ctx context.Context, n int) ([]byte, error) {
	return g.c.AllocShared(ctx, n)
}

func (g gocclComm) FreeShared(ctx context.Context, b []byte) error { return g.c.FreeShared(ctx, b) }

// TraceSpan puts dp's bucket and ZeRO spans on the communicator's timeline.
func (g gocclComm) TraceSpan(cat, name string, args map[string]any) func() {
	return g.c.TraceSpan(cat, name, args)
}

// New builds an Engine over a goccl communicator (see NewOn).
func New(ctx context.Context, c *goccl.Comm, params []Spec, o Options) (*Engine, error) {
	return NewOn(ctx, Comm(c), params, o)
}
