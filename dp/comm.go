package dp

import (
	"context"

	"github.com/goccl/goccl/transport"
)

// Pending is a collective in flight (goccl's *Work satisfies it).
type Pending interface {
	// Wait blocks until the collective finished or ctx ends, and returns its error.
	Wait(ctx context.Context) error
	// Done is closed when the collective has finished.
	Done() <-chan struct{}
}

// Collectives is what an Engine needs from a communicator: the asynchronous
// collectives, issued in the same order on every rank and run one at a time in that
// order (goccl.Comm's contract). Comm adapts a *goccl.Comm; tests wrap it to slow it
// down or to record when each collective really starts.
type Collectives interface {
	Rank() int
	Size() int
	AllReduce(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) Pending
	ReduceScatter(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) Pending
	AllGather(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType) Pending
	Broadcast(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, root int) Pending
}

// SharedAllocator is an optional Collectives ability: memory every rank of the host maps
// (goccl's Comm.AllocShared and FreeShared, both collective), for Options.SharedMemory.
type SharedAllocator interface {
	AllocShared(ctx context.Context, n int) ([]byte, error)
	FreeShared(ctx context.Context, b []byte) error
}
