package mlp

import (
	"context"
	"fmt"
	"time"

	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/transport"
)

// Trainer runs the MLP data-parallel on a dp.Engine: each optimizer step is AccumSteps
// micro-steps of Batch samples per rank, with the Engine's hooks in the places
// PyTorch's DDP and FSDP put theirs. Rank r's micro-step a of step t reads samples
// ((t*A + a)*W + r)*Batch onward, so W ranks with batch b see exactly the samples one
// process with batch W*b*A sees.
type Trainer struct {
	Eng   *dp.Engine
	Model *MLP
	Data  Dataset
	Batch int

	x      []float32
	labels []int
	// fp32 scratch for 16-bit working types: the model computes in float32.
	pw, pb, gw, gb [][]float32
}

// StepTimes is how one optimizer step's time was spent on this rank.
type StepTimes struct {
	Loss              float64 // mean loss over the step's micro-batches
	Total             time.Duration
	Forward, Backward time.Duration // compute plus ZeRO-3's hooks
	Wait              time.Duration // blocked in Wait after backward
	Optim             time.Duration // Step (AdamW and the ZeRO-1/2 all-gather)
	Comm              dp.StepStats
}

// NewTrainer checks that the engine holds the model's parameters and sizes buffers.
func NewTrainer(eng *dp.Engine, model *MLP, data Dataset, batch int) (*Trainer, error) {
	if batch < 0 {
		return nil, fmt.Errorf("mlp: batch %d (want >= 0)", batch)
	}
	if data.Dim() != model.dims[0] || data.Classes() != model.dims[len(model.dims)-1] {
		return nil, fmt.Errorf("mlp: data has %d features and %d classes but the model is %v", data.Dim(), data.Classes(), model.dims)
	}
	if eng.NumParams() != 2*model.Layers() {
		return nil, fmt.Errorf("mlp: engine holds %d tensors, the model has %d", eng.NumParams(), 2*model.Layers())
	}
	t := &Trainer{Eng: eng, Model: model, Data: data, Batch: batch,
		x: make([]float32, batch*data.Dim()), labels: make([]int, batch)}
	if eng.DType() != transport.Float32 {
		L := model.Layers()
		t.pw, t.pb, t.gw, t.gb = make([][]float32, L), make([][]float32, L), make([][]float32, L), make([][]float32, L)
		for l := range L {
			in, out := model.dims[l], model.dims[l+1]
			t.pw[l], t.pb[l] = make([]float32, out*in), make([]float32, out)
			t.gw[l], t.gb[l] = make([]float32, out*in), make([]float32, out)
		}
	}
	return t, nil
}

// load reads this rank's micro-batch.
func (t *Trainer) load(step, micro int) {
	A, W, r, b := t.Eng.AccumSteps(), t.Eng.World(), t.Eng.Rank(), t.Batch
	base := ((step*A+micro)*W + r) * b
	d := t.Data.Dim()
	for i := range b {
		t.labels[i] = t.Data.Sample(base+i, t.x[i*d:(i+1)*d])
	}
	t.Model.SetBatch(t.x, b)
}

// bind points the model's layer l at the engine's parameters (a view for fp32, a
// widened copy for 16-bit types).
func (t *Trainer) bind(l int) error {
	w, err := t.Eng.Param(2 * l)
	if err != nil {
		return err
	}
	b, err := t.Eng.Param(2*l + 1)
	if err != nil {
		return err
	}
	if t.pw == nil {
		t.Model.Bind(l, dp.F32(w), dp.F32(b))
		return nil
	}
	dev, dt := t.Eng.Device(), t.Eng.DType()
	for _, c := range []struct {
		dst []float32
		src transport.Buffer
	}{{t.pw[l], w}, {t.pb[l], b}} {
		if err := dev.Cast(hostF32(c.dst), transport.Float32, c.src, dt, len(c.dst), 1, false); err != nil {
			return fmt.Errorf("mlp: widen layer %d parameters: %w", l, err)
		}
	}
	t.Model.Bind(l, t.pw[l], t.pb[l])
	return nil
}

// backwardParams computes layer l's gradients into the engine and marks them ready.
func (t *Trainer) backwardParams(ctx context.Context, l int) error {
	gw, err := t.Eng.Grad(2 * l)
	if err != nil {
		return err
	}
	gb, err := t.Eng.Grad(2*l + 1)
	if err != nil {
		return err
	}
	if t.gw == nil {
		t.Model.BindGrads(l, dp.F32(gw), dp.F32(gb))
		t.Model.BackwardParams(l)
	} else {
		clear(t.gw[l])
		clear(t.gb[l])
		t.Model.BindGrads(l, t.gw[l], t.gb[l])
		t.Model.BackwardParams(l)
		dev, dt := t.Eng.Device(), t.Eng.DType()
		if err := dev.Cast(gw, dt, hostF32(t.gw[l]), transport.Float32, len(t.gw[l]), 1, true); err != nil {
			return fmt.Errorf("mlp: store layer %d weight gradient: %w", l, err)
		}
		if err := dev.Cast(gb, dt, hostF32(t.gb[l]), transport.Float32, len(t.gb[l]), 1, true); err != nil {
			return fmt.Errorf("mlp: store layer %d bias gradient: %w", l, err)
		}
	}
	// Bias first: it is registered after the weight, so it sits in the earlier bucket.
	if err := t.Eng.MarkReady(ctx, 2*l+1); err != nil {
		return err
	}
	return t.Eng.MarkReady(ctx, 2*l)
}

// MicroStep runs one forward and backward pass and Wait; it returns the loss.
func (t *Trainer) MicroStep(ctx context.Context, step, micro int, st *StepTimes) (float64, error) {
	t.load(step, micro)
	L := t.Model.Layers()
	t0 := time.Now()
	for l := range L {
		if err := t.Eng.BeginForward(ctx, l); err != nil {
			return 0, err
		}
		if err := t.bind(l); err != nil {
			return 0, err
		}
		t.Model.Forward(l)
		if err := t.Eng.EndForward(ctx, l); err != nil {
			return 0, err
		}
	}
	scale := t.Eng.LossScale() / float32(t.Eng.AccumSteps())
	loss := t.Model.Loss(t.labels, scale)
	t1 := time.Now()
	for l := L - 1; l >= 0; l-- {
		if err := t.Eng.BeginBackward(ctx, l); err != nil {
			return 0, err
		}
		if err := t.bind(l); err != nil {
			return 0, err
		}
		if err := t.backwardParams(ctx, l); err != nil {
			return 0, err
		}
		t.Model.BackwardInput(l)
		if err := t.Eng.EndBackward(ctx, l); err != nil {
			return 0, err
		}
	}
	t2 := time.Now()
	if err := t.Eng.Wait(ctx); err != nil {
		return 0, err
	}
	if st != nil {
		st.Forward += t1.Sub(t0)
		st.Backward += t2.Sub(t1)
		st.Wait += time.Since(t2)
	}
	return loss, nil
}

// Step runs the step's micro-steps and the optimizer. With sync false it runs them
// under NoSync and applies LocalStep (DDP only), to time a step without communication.
func (t *Trainer) Step(ctx context.Context, step int, sync bool) (StepTimes, error) {
	return RunStep(ctx, t.Eng, sync, func(a int, st *StepTimes) (float64, error) { return t.MicroStep(ctx, step, a, st) })
}

// RunStep is one optimizer step of any trainer on eng: its accumulation micro-steps
// (with communication off on all of them when sync is false, like PyTorch's no_sync),
// then the engine's Step (or LocalStep), with the times and the loss averaged over the
// micro-steps. micro runs micro-step a and returns its loss.
func RunStep(ctx context.Context, eng *dp.Engine, sync bool, micro func(a int, st *StepTimes) (float64, error)) (StepTimes, error) {
	var st StepTimes
	start := time.Now()
	A := eng.AccumSteps()
	for a := range A {
		var restore func()
		if !sync { // otherwise the engine's accumulation counter decides
			restore = eng.NoSync()
		}
		loss, err := micro(a, &st)
		if restore != nil {
			restore()
		}
		if err != nil {
			return st, err
		}
		st.Loss += loss / float64(A)
	}
	t0 := time.Now()
	var err error
	if sync {
		err = eng.Step(ctx)
	} else {
		err = eng.LocalStep(ctx)
	}
	if err != nil {
		return st, err
	}
	st.Optim = time.Since(t0)
	st.Total = time.Since(start)
	st.Comm = eng.LastStep()
	return st, nil
}

func hostF32(xs []float32) transport.Buffer {
	return transport.HostBuffer(unsafeBytes(xs))
}
