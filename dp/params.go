package dp

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/transport"
)

// Param returns parameter i's working values. Under DDP and ZeRO-1/2 they are always
// there; under ZeRO-3 only between BeginForward and EndForward (or BeginBackward and
// EndBackward) of the parameter's layer, while the layer is gathered.
func (e *Engine) Param(i int) (transport.Buffer, error) {
	if err := e.checkParam(i, "Param"); err != nil {
		return transport.Buffer{}, err
	}
	ui, n := e.lay.unitOf[i], e.lay.specs[i].Len
	if e.o.Stage < 3 {
		return elemView(e.params, e.pt, e.lay.units[ui].off+e.lay.offOf[i], n)
	}
	if e.gathered[ui].Len() == 0 || e.gather[ui] != nil {
		ly := e.lay.specs[i].Layer
		return transport.Buffer{}, fmt.Errorf("dp: rank %d: %w: parameter %s of layer %d is not gathered: ZeRO-3 holds only a shard; call BeginForward(ctx, %d) or BeginBackward(ctx, %d) first",
			e.rank, transport.ErrInvalid, e.paramName(i), ly, ly, ly)
	}
	return elemView(e.gathered[ui], e.pt, e.lay.offOf[i], n)
}

func (e *Engine) checkLayer(layer int, what string) error {
	if layer < 0 || layer >= len(e.lay.layers) {
		return fmt.Errorf("dp: %w: %s: layer %d (valid: 0..%d)", transport.ErrInvalid, what, layer, len(e.lay.layers)-1)
	}
	return nil
}

// BeginForward is called before layer's forward. Under ZeRO-3 it makes sure the layer
// is gathered (waiting for its all-gather) and starts gathering the next layer, so
// that communication overlaps this layer's compute; otherwise it does nothing.
func (e *Engine) BeginForward(ctx context.Context, layer int) error {
	if err := e.checkLayer(layer, "BeginForward"); err != nil || e.o.Stage < 3 {
		return err
	}
	if err := e.ensureGathered(ctx, layer); err != nil {
		return err
	}
	if layer+1 < len(e.lay.layers) {
		return e.prefetch(ctx, layer+1)
	}
	return nil
}

// EndForward is called after layer's forward. ZeRO-3 frees the gathered parameters,
// except the last layer's, which backward needs next.
func (e *Engine) EndForward(ctx context.Context, layer int) error {
	if err := e.checkLayer(layer, "EndForward"); err != nil || e.o.Stage < 3 {
		return err
	}
	if layer == len(e.lay.layers)-1 {
		return nil
	}
	return e.release(ctx, layer)
}

// BeginBackward is called before layer's backward. ZeRO-3 gathers the layer again
// (or keeps it, for the last layer) and prefetches the layer below.
func (e *Engine) BeginBackward(ctx context.Context, layer int) error {
	if err := e.checkLayer(layer, "BeginBackward"); err != nil || e.o.Stage < 3 {
		return err
	}
	if err := e.ensureGathered(ctx, layer); err != nil {
		return err
	}
	if layer > 0 {
		return e.prefetch(ctx, layer-1)
	}
	return nil
}

// EndBackward is called once layer's backward no longer reads its parameters.
// ZeRO-3 frees them.
func (e *Engine) EndBackward(ctx context.Context, layer int) error {
	if err := e.checkLayer(layer, "EndBackward"); err != nil || e.o.Stage < 3 {
		return err
	}
	return e.release(ctx, layer)
}

// prefetch issues the all-gather of layer's parameters unless they are there or coming.
func (e *Engine) prefetch(ctx context.Context, layer int) error {
	for _, ui := range e.lay.layers[layer] {
		if e.gathered[ui].Len() > 0 || e.lay.units[ui].n == 0 {
			continue
		}
		u := e.lay.units[ui]
		buf, err := e.allocWork(e.pt, u.padded(e.world))
		if err != nil {
			return fmt.Errorf("dp: rank %d: gather buffer for layer %d: %w", e.rank, layer, err)
		}
		e.gathered[ui] = buf
		own := e.ownParams(ui)
		e.gather[ui] = e.issue("allgather", ui, buf.Len(), func() Pending {
			return e.coll.AllGather(ctx, own, buf, u.per, e.pt)
		})
	}
	return e.poll()
}

// ensureGathered waits until layer's parameters are gathered.
func (e *Engine) ensureGathered(ctx context.Context, layer int) error {
	if err := e.prefetch(ctx, layer); err != nil {
		return err
	}
	for _, ui := range e.lay.layers[layer] {
		if o := e.gather[ui]; o != nil {
			e.gather[ui] = nil
			if err := e.complete(ctx, o); err != nil {
				return fmt.Errorf("dp: rank %d: gather layer %d: %w", e.rank, layer, err)
			}
		}
	}
	return nil
}

// release frees layer's gathered parameters (waiting first if a prefetch is still in
// flight: its buffer is being written).
func (e *Engine) release(ctx context.Context, layer int) error {
	for _, ui := range e.lay.layers[layer] {
		if o := e.gather[ui]; o != nil {
			e.gather[ui] = nil
			if err := e.complete(ctx, o); err != nil {
				return err
			}
		}
		e.freeGathered(ui)
	}
	return nil
}

// Snapshot returns every parameter's fp32 master value, gathered from the shards under
// ZeRO (a collective: every rank calls it). It is for checkpoints and tests, and holds
// 4 bytes per padded parameter while it runs.
func (e *Engine) Snapshot(ctx context.Context) ([][]float32, error) {
	l := e.lay
	full, err := e.dev.Alloc(transport.Float32, l.full)
	if err != nil {
		return nil, fmt.Errorf("dp: rank %d: snapshot buffer: %w", e.rank, err)
	}
	defer e.dev.Free(full)
	var ops []*op
	for ui, u := range l.units {
		n := u.padded(e.world)
		if e.o.Stage == 0 {
			n = u.n
		}
		dst := mustView(full, transport.Float32, u.off, n)
		own := mustView(dst, transport.Float32, e.ownOffset(u), u.per)
		if err := e.dev.Cast(own, transport.Float32, e.ownMaster(ui), transport.Float32, u.per, 1, false); err != nil {
			return nil, fmt.Errorf("dp: rank %d: snapshot: %w", e.rank, err)
		}
		if e.o.Stage > 0 && e.world > 1 {
			ops = append(ops, e.issue("allgather", ui, dst.Len(), func() Pending {
				return e.coll.AllGather(ctx, own, dst, u.per, transport.Float32)
			}))
		}
	}
	for _, o := range ops {
		if err := e.complete(ctx, o); err != nil {
			return nil, err
		}
	}
	host := make([]float32, l.full)
	if err := e.dev.Download(ctx, asBytes(host), full); err != nil {
		return nil, fmt.Errorf("dp: rank %d: snapshot: %w", e.rank, err)
	}
	out := make([][]float32, len(l.specs))
	for i, s := range l.specs {
		off := e.paramOffset(i)
		out[i] = host[off : off+s.Len : off+s.Len]
	}
	return out, nil
}
