package dptest

import (
	"context"
	"sync"

	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/transport"
)

// Fake returns world goroutine-rank communicators that run every collective by
// reading each other's memory (reductions through algos/reduce, raw copies for gathers
// and broadcasts). It is a stand-in for tests of dp's own logic;
// the real tests run on goccl.InitLocal.
func Fake(world int) []dp.Collectives {
	g := &group{world: world, slots: make([][]byte, world)}
	g.cond = sync.NewCond(&g.mu)
	cs := make([]dp.Collectives, world)
	for r := range world {
		f := &fake{g: g, rank: r, queue: make(chan func(), 64)}
		go func() {
			for fn := range f.queue {
				fn()
			}
		}()
		cs[r] = f
	}
	return cs
}

type group struct {
	world   int
	mu      sync.Mutex
	cond    *sync.Cond
	slots   [][]byte
	arrived int
	gen     int
}

// barrier returns after every rank reached it.
func (g *group) barrier() {
	g.mu.Lock()
	gen := g.gen
	g.arrived++
	if g.arrived == g.world {
		g.arrived, g.gen = 0, g.gen+1
		g.cond.Broadcast()
	} else {
		for gen == g.gen {
			g.cond.Wait()
		}
	}
	g.mu.Unlock()
}

type fake struct {
	g     *group
	rank  int
	queue chan func()
}

type work struct {
	done chan struct{}
	err  error
}

func (w *work) Done() <-chan struct{} { return w.done }
func (w *work) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fake) Rank() int { return f.rank }
func (f *fake) Size() int { return f.g.world }

// run deposits a snapshot of send, waits for everyone, lets compute read all
// snapshots, and waits again so nobody's snapshot is reused early.
func (f *fake) run(send transport.Buffer, n int, compute func(all [][]byte) error) dp.Pending {
	w := &work{done: make(chan struct{})}
	f.queue <- func() {
		f.g.slots[f.rank] = append([]byte(nil), send.Bytes()[:min(n, send.Len())]...)
		f.g.barrier()
		w.err = compute(f.g.slots)
		f.g.barrier()
		close(w.done)
	}
	return w
}

// reduce combines elements [off, off+n) of every rank's snapshot with the project's
// reduction kernels (float16 and bfloat16 accumulate and round as the real ones do).
func (f *fake) reduce(all [][]byte, off, n int, dt transport.DType, op transport.Op, dst []byte) error {
	sz := dt.Size()
	acc := append([]byte(nil), all[0][off*sz:(off+n)*sz]...)
	for _, b := range all[1:] {
		if err := reduce.Apply(dt, op, acc, b[off*sz:(off+n)*sz]); err != nil {
			return err
		}
	}
	if err := reduce.Finish(dt, op, acc, len(all)); err != nil {
		return err
	}
	copy(dst, acc)
	return nil
}

func (f *fake) AllReduce(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) dp.Pending {
	return f.run(send, count*dt.Size(), func(all [][]byte) error {
		return f.reduce(all, 0, count, dt, op, recv.Bytes())
	})
}

func (f *fake) ReduceScatter(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) dp.Pending {
	return f.run(send, f.g.world*count*dt.Size(), func(all [][]byte) error {
		return f.reduce(all, f.rank*count, count, dt, op, recv.Bytes())
	})
}

func (f *fake) AllGather(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType) dp.Pending {
	n := count * dt.Size()
	return f.run(send, n, func(all [][]byte) error {
		for r, b := range all {
			copy(recv.Bytes()[r*n:(r+1)*n], b)
		}
		return nil
	})
}

func (f *fake) Broadcast(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, root int) dp.Pending {
	n := count * dt.Size()
	return f.run(send, n, func(all [][]byte) error {
		copy(recv.Bytes()[:n], all[root])
		return nil
	})
}
