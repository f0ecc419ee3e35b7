package dp_test

import (
	"context"

	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/transport"
)

// oneStep runs a backward pass that writes gradient value (i+1)/1000 into parameter
// i (through the layer hooks, as a model would), then Wait and Step.
func oneStep(ctx context.Context, e *dp.Engine) error {
	if err := pass(ctx, e, nil); err != nil {
		return err
	}
	return e.Step(ctx)
}

// pass runs forward hooks, then backward from the last layer, filling each gradient
// and marking it ready; between(l) runs after layer l's gradients are marked.
func pass(ctx context.Context, e *dp.Engine, between func(layer int) error) error {
	return passFull(ctx, e, func(i int) float32 { return float32(i+1) / 1000 }, between)
}

// passWith is pass with gradient value grad(i) for parameter i.
func passWith(ctx context.Context, e *dp.Engine, grad func(i int) float32) error {
	return passFull(ctx, e, grad, nil)
}

func passFull(ctx context.Context, e *dp.Engine, grad func(i int) float32, between func(layer int) error) error {
	L := e.NumLayers()
	for l := range L {
		if err := e.BeginForward(ctx, l); err != nil {
			return err
		}
		if err := e.EndForward(ctx, l); err != nil {
			return err
		}
	}
	for l := L - 1; l >= 0; l-- {
		if err := e.BeginBackward(ctx, l); err != nil {
			return err
		}
		for i := e.NumParams() - 1; i >= 0; i-- {
			if e.Spec(i).Layer != l {
				continue
			}
			g, err := e.Grad(i)
			if err != nil {
				return err
			}
			fill(e, g, grad(i))
			if err := e.MarkReady(ctx, i); err != nil {
				return err
			}
		}
		if between != nil {
			if err := between(l); err != nil {
				return err
			}
		}
		if err := e.EndBackward(ctx, l); err != nil {
			return err
		}
	}
	return e.Wait(ctx)
}

func fill(e *dp.Engine, g transport.Buffer, v float32) {
	src := make([]float32, g.Len()/e.DType().Size())
	for i := range src {
		src[i] = v
	}
	_ = e.Device().Cast(g, e.DType(), dp.HostFloat32s(src), transport.Float32, len(src), 1, true)
}
