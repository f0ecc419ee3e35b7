package dp_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/transport"
)

// Ranks that register different parameters (or options) all get an error naming the
// difference, instead of a hang or silently mixed gradients.
func TestRegistrationMismatch(t *testing.T) {
	base := specsFor([]int{5, 4, 3})
	rename := append([]dp.Spec(nil), base...)
	rename[2].Name = "other.weight"
	resize := append([]dp.Spec(nil), base...)
	resize[1] = dp.Spec{Name: resize[1].Name, Len: 3, Layer: 0}
	cases := []struct {
		name  string
		rank1 []dp.Spec
		opts1 dp.Options
		want  string
	}{
		{"size", resize, dp.Options{}, "tensor 1 is 4 elements in layer 0 on rank 0 but 3 elements in layer 0 on rank 1"},
		{"name", rename, dp.Options{}, "tensor 2 is 12 elements in layer 1 on rank 0 but 12 elements in layer 1 on rank 1, under a different name"},
		{"count", base[:3], dp.Options{}, "rank 0 registered 4 tensors (39 elements), rank 1 registered 3 tensors (36 elements)"},
		{"stage", base, dp.Options{Stage: 2}, "ranks disagree on the ZeRO stage: rank 0 has 0, rank 1 has 2"},
		{"precision", base, dp.Options{Precision: "bf16"}, "rank 0 has float32, rank 1 has bfloat16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := ranks(t, 2)
			errs := parallel(2, func(r int) error {
				specs, o := base, dp.Options{}
				if r == 1 {
					specs, o = c.rank1, c.opts1
				}
				_, err := dp.NewOn(ctx, comms[r], specs, o)
				return err
			})
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				require.ErrorIs(t, err, transport.ErrMismatch)
				require.Contains(t, err.Error(), c.want)
				require.Contains(t, err.Error(), fmt.Sprintf("rank %d:", r))
			}
		})
	}
}

// Misuse of the backward protocol is an error that says what to do.
func TestProtocolErrors(t *testing.T) {
	specs := specsFor([]int{5, 4, 3})
	type step func(ctx context.Context, e *dp.Engine) error
	markAll := func(ctx context.Context, e *dp.Engine) error {
		for i := e.NumParams() - 1; i >= 0; i-- {
			if err := e.MarkReady(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	cases := []struct {
		name  string
		stage int
		accum int
		steps []step
		want  string
	}{
		{"ready twice", 0, 1, []step{func(ctx context.Context, e *dp.Engine) error {
			if err := e.MarkReady(ctx, 3); err != nil {
				return err
			}
			return e.MarkReady(ctx, 3)
		}}, `gradient of "fc1.bias" (parameter 3) marked ready twice in one backward pass`},
		{"step without wait", 0, 1, []step{markAll, func(ctx context.Context, e *dp.Engine) error { return e.Step(ctx) }},
			"Step before Wait"},
		{"step during backward", 1, 1, []step{func(ctx context.Context, e *dp.Engine) error {
			if err := e.MarkReady(ctx, 3); err != nil {
				return err
			}
			return e.Step(ctx)
		}}, "Step during backward: 3 of 4 gradients not marked ready (fc0.weight, fc0.bias, fc1.weight)"},
		{"wait with missing", 0, 1, []step{func(ctx context.Context, e *dp.Engine) error {
			if err := e.MarkReady(ctx, 0); err != nil {
				return err
			}
			return e.Wait(ctx)
		}}, "Wait with 3 of 4 gradients not marked ready (fc0.bias, fc1.weight, fc1.bias)"},
		{"next pass without wait", 0, 1, []step{markAll, markAll}, "in a new backward pass before Wait ended the previous one"},
		{"step after no-sync micro-step", 0, 2, []step{markAll, func(ctx context.Context, e *dp.Engine) error { return e.Wait(ctx) },
			func(ctx context.Context, e *dp.Engine) error { return e.Step(ctx) }}, "Step after a no-sync micro-step (1 of 2 accumulated)"},
		{"step without backward", 2, 1, []step{func(ctx context.Context, e *dp.Engine) error { return e.Step(ctx) }},
			"Step without a backward pass since the last step"},
		{"zero-3 param not gathered", 3, 1, []step{func(ctx context.Context, e *dp.Engine) error { _, err := e.Param(2); return err }},
			`parameter "fc1.weight" (parameter 2) of layer 1 is not gathered: ZeRO-3 holds only a shard; call BeginForward(ctx, 1)`},
		{"bad index", 0, 1, []step{func(ctx context.Context, e *dp.Engine) error { return e.MarkReady(ctx, 9) }},
			"MarkReady: parameter index 9 (valid: 0..3)"},
		{"bad layer", 3, 1, []step{func(ctx context.Context, e *dp.Engine) error { return e.BeginForward(ctx, 2) }},
			"BeginForward: layer 2 (valid: 0..1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := ranks(t, 2)
			errs := parallel(2, func(r int) error {
				e, err := dp.NewOn(ctx, comms[r], specs, dp.Options{Stage: c.stage, AccumSteps: c.accum})
				if err != nil {
					return err
				}
				for _, s := range c.steps {
					if err := s(ctx, e); err != nil {
						return err
					}
				}
				return nil
			})
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				require.ErrorIs(t, err, transport.ErrInvalid)
				require.Contains(t, err.Error(), c.want)
			}
		})
	}
}

// Options and parameter lists that cannot work are rejected before any communication.
func TestInvalidOptions(t *testing.T) {
	good := specsFor([]int{3, 2})
	cases := []struct {
		name  string
		specs []dp.Spec
		o     dp.Options
		want  string
	}{
		{"stage", good, dp.Options{Stage: 4}, "ZeRO stage 4 (valid: 0 = DDP, 1, 2, 3)"},
		{"precision", good, dp.Options{Precision: "fp8"}, `precision "fp8" (valid: fp32, bf16, fp16)`},
		{"compress stage", good, dp.Options{Stage: 1, Compress: "bf16"}, "needs stage 0 with fp32 gradients"},
		{"compress type", good, dp.Options{Compress: "int8"}, `gradient compression "int8" (valid: bf16, fp16`},
		{"accum", good, dp.Options{AccumSteps: -1}, "-1 accumulation steps (want >= 1)"},
		{"lr", good, dp.Options{AdamW: &dp.AdamW{LR: -1, Eps: 1e-8}}, "learning rate -1 (want finite and >= 0)"},
		{"none", nil, dp.Options{}, "no parameters registered"},
		{"dup", []dp.Spec{{Name: "a", Len: 1}, {Name: "a", Len: 2}}, dp.Options{}, `parameters 0 and 1 are both named "a"`},
		{"init", []dp.Spec{{Name: "a", Len: 2, Init: []float32{1}}}, dp.Options{}, `"a" has Len 2 but 1 initial values`},
		{"layers", []dp.Spec{{Name: "a", Len: 1}, {Name: "b", Len: 1, Layer: 2}}, dp.Options{}, `"b" is in layer 2 after layer 0`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			comms := ranks(t, 1)
			_, err := dp.NewOn(testCtx(t), comms[0], c.specs, c.o)
			require.ErrorIs(t, err, transport.ErrInvalid)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

// A collective that fails (here: a cancelled context) surfaces from Wait wrapped with
// the bucket it belonged to; nothing hangs.
func TestCancelledWait(t *testing.T) {
	comms := ranks(t, 2)
	ctx := testCtx(t)
	errs := parallel(2, func(r int) error {
		e, err := dp.NewOn(ctx, comms[r], specsFor([]int{3, 2}), dp.Options{})
		if err != nil {
			return err
		}
		if r == 1 {
			return nil // never joins the gradient all-reduce
		}
		for i := e.NumParams() - 1; i >= 0; i-- {
			if err := e.MarkReady(ctx, i); err != nil {
				return err
			}
		}
		short, cancel := context.WithTimeout(ctx, 50e6)
		defer cancel()
		return e.Wait(short)
	})
	require.NoError(t, errs[1])
	require.Error(t, errs[0])
	require.True(t, errors.Is(errs[0], context.DeadlineExceeded) || errors.Is(errs[0], transport.ErrTimeout), "%v", errs[0])
}
