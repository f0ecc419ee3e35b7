package cuda

import (
	"context"
	"fmt"
	"sync"

	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/transport"
)

// Collectives wraps c for device buffers. NCCL's in-place forms pass a recv that
// starts where send starts but is shorter (ReduceScatter: recv = send + rank*count)
// or longer (AllGather: send = recv + rank*count), which on rank 0 share a start
// address. goccl's staging of device buffers through host memory (collective.go,
// hostBuffers) treats a shared start as one buffer of send's length, which breaks
// both forms on rank 0; until it stages the larger of the two, this wrapper gives such
// calls a separate temporary device buffer on d and copies through it. Calls that are
// not in place pass straight through.
func Collectives(c dp.Collectives, d *Device) dp.Collectives { return dealias{c, d} }

type dealias struct {
	dp.Collectives
	d *Device
}

func aliased(send, recv transport.Buffer) bool {
	return send.Kind() == transport.Device && transport.Same(send, recv) && send.Len() != recv.Len()
}

func (x dealias) ReduceScatter(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) dp.Pending {
	if !aliased(send, recv) {
		return x.Collectives.ReduceScatter(ctx, send, recv, count, dt, op)
	}
	tmp, err := x.d.Alloc(dt, count)
	if err != nil {
		return failed{fmt.Errorf("dp/cuda: in-place reduce-scatter buffer: %w", err)}
	}
	p := x.Collectives.ReduceScatter(ctx, send, tmp, count, dt, op)
	return &then{Pending: p, after: func() error {
		defer x.d.Free(tmp)
		return x.d.copyDtoD(recv, tmp)
	}}
}

func (x dealias) AllGather(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType) dp.Pending {
	if !aliased(send, recv) {
		return x.Collectives.AllGather(ctx, send, recv, count, dt)
	}
	tmp, err := x.d.Alloc(dt, count)
	if err == nil {
		err = x.d.copyDtoD(tmp, send)
	}
	if err != nil {
		x.d.Free(tmp)
		return failed{fmt.Errorf("dp/cuda: in-place all-gather buffer: %w", err)}
	}
	p := x.Collectives.AllGather(ctx, tmp, recv, count, dt)
	return &then{Pending: p, after: func() error { x.d.Free(tmp); return nil }}
}

// then runs after once, on the first Wait that sees the collective succeed.
type then struct {
	dp.Pending
	after func() error
	once  sync.Once
	err   error
}

func (t *then) Wait(ctx context.Context) error {
	if err := t.Pending.Wait(ctx); err != nil {
		return err
	}
	t.once.Do(func() { t.err = t.after() })
	return t.err
}

type failed struct{ err error }

func (f failed) Wait(context.Context) error { return f.err }
func (f failed) Done() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}
