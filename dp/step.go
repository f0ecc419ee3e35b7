package dp

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/goccl/goccl/transport"
)

// Step applies AdamW to the averaged gradients and makes the new parameters visible:
// DDP updates its full replica; ZeRO updates this rank's shard of the fp32 master
// weights and moments, then ZeRO-1 and 2 all-gather the working parameters (ZeRO-3
// keeps only its shard and gathers a layer when it is next used). The gradients are
// zero afterwards. It is an error to Step before Wait, or after a no-sync micro-step.
func (e *Engine) Step(ctx context.Context) error {
	if err := e.readyToStep("Step"); err != nil {
		return err
	}
	if !e.synced {
		return fmt.Errorf("dp: rank %d: %w: Step after a no-sync micro-step (%d of %d accumulated): the gradients are still local; run the last micro-step with synchronisation on",
			e.rank, transport.ErrInvalid, e.micro, e.o.AccumSteps)
	}
	return e.update(ctx, true)
}

// LocalStep applies the optimizer to the local, unsynchronised gradients, so replicas
// drift apart. It exists for benchmarks that time a step without communication, the
// way PyTorch's DDP is timed under no_sync; DDP only.
func (e *Engine) LocalStep(ctx context.Context) error {
	if e.o.Stage != 0 {
		return fmt.Errorf("dp: rank %d: %w: LocalStep is for DDP (stage 0), not stage %d", e.rank, transport.ErrInvalid, e.o.Stage)
	}
	if err := e.readyToStep("LocalStep"); err != nil {
		return err
	}
	return e.update(ctx, false)
}

func (e *Engine) readyToStep(what string) error {
	if e.inPass {
		if e.nReady < len(e.ready) {
			return fmt.Errorf("dp: rank %d: %w: %s during backward: %d of %d gradients not marked ready (%s)", e.rank, transport.ErrInvalid, what, len(e.ready)-e.nReady, len(e.ready), e.missing())
		}
		return fmt.Errorf("dp: rank %d: %w: %s before Wait: %d gradient collectives may still be in flight (call Wait(ctx) after backward)", e.rank, transport.ErrInvalid, what, len(e.inflight))
	}
	if e.micro == 0 {
		return fmt.Errorf("dp: rank %d: %w: %s without a backward pass since the last step", e.rank, transport.ErrInvalid, what)
	}
	return nil
}

func (e *Engine) update(ctx context.Context, shared bool) error {
	skip, err := e.overflow(ctx, shared)
	if err != nil {
		return err
	}
	if !skip {
		e.steps++
		for ui, u := range e.lay.units {
			m, v := e.ownMoments(ui)
			a := &AdamWArgs{N: u.per, Master: e.ownMaster(ui), M: m, V: v, Grad: e.ownGrads(ui), GradType: e.pt,
				GradScale: 1 / e.lossScale, Hyper: e.hp, Step: e.steps}
			if !e.aliased {
				a.Param, a.ParamType = e.ownParams(ui), e.pt
			}
			if err := e.dev.AdamW(ctx, a); err != nil {
				return fmt.Errorf("dp: rank %d: AdamW on bucket %d: %w", e.rank, ui, err)
			}
		}
		if e.o.Stage == 1 || e.o.Stage == 2 {
			if err := e.gatherParams(ctx); err != nil {
				return err
			}
		}
	}
	for ui := range e.lay.units { // ZeRO-3 copies are stale now
		if e.gather[ui] != nil {
			if err := e.complete(ctx, e.gather[ui]); err != nil {
				return err
			}
			e.gather[ui] = nil
		}
		e.freeGathered(ui)
	}
	if err := e.dev.Zero(e.grads, e.pt, e.grads.Len()/e.pt.Size()); err != nil {
		return fmt.Errorf("dp: rank %d: zero gradients: %w", e.rank, err)
	}
	e.micro, e.synced = 0, false
	e.last = e.stats.take()
	e.last.Skipped = skip
	return nil
}

// gatherParams all-gathers every unit's updated working parameters in place (each
// rank's slice sits at its NCCL in-place offset), all issued before any is waited for.
func (e *Engine) gatherParams(ctx context.Context) error {
	if e.world == 1 {
		return nil
	}
	ops := make([]*op, len(e.lay.units))
	for ui, u := range e.lay.units {
		full, own := e.fullParams(ui), e.ownParams(ui)
		ops[ui] = e.issue("allgather", ui, full.Len(), func() Pending {
			return e.coll.AllGather(ctx, own, full, u.per, e.pt)
		})
	}
	for _, o := range ops {
		if err := e.complete(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// overflow implements fp16 dynamic loss scaling: any Inf or NaN in the gradients (on
// any rank: under ZeRO each holds only a shard) skips the update and halves the scale.
func (e *Engine) overflow(ctx context.Context, shared bool) (bool, error) {
	if e.pt != transport.Float16 {
		return false, nil
	}
	bad := false
	for ui := range e.lay.units {
		g := e.ownGrads(ui)
		nf, err := e.dev.NonFinite(g, e.pt, g.Len()/e.pt.Size())
		if err != nil {
			return false, fmt.Errorf("dp: rank %d: overflow check: %w", e.rank, err)
		}
		bad = bad || nf
	}
	if shared && e.o.Stage > 0 && e.world > 1 {
		flag := []float32{0}
		if bad {
			flag[0] = 1
		}
		fb := transport.HostBuffer(unsafe.Slice((*byte)(unsafe.Pointer(&flag[0])), 4))
		if err := e.coll.AllReduce(ctx, fb, fb, 1, transport.Float32, transport.Max).Wait(ctx); err != nil {
			return false, fmt.Errorf("dp: rank %d: agree on gradient overflow: %w", e.rank, err)
		}
		bad = flag[0] != 0
	}
	if bad {
		e.skipped++
		e.goodSteps = 0
		e.lossScale = max(e.lossScale/2, math.SmallestNonzeroFloat32)
		return true, nil
	}
	e.goodSteps++
	if e.goodSteps >= e.o.LossScaleWindow {
		e.goodSteps = 0
		e.lossScale = min(e.lossScale*2, 1<<24)
	}
	return false, nil
}
