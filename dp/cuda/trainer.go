package cuda

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/dp/mlp"
	"github.com/goccl/goccl/nccl/cublas"
	"github.com/goccl/goccl/transport"
)

// Trainer is dp/mlp's Trainer on the GPU: the same MLP (Linear+ReLU, softmax
// cross-entropy), the same samples per rank and micro-step, and the Engine's hooks in
// the same places, with activations in device memory, the matrix products through
// cuBLAS and the element-wise steps as NVRTC kernels. Only the batch (features and
// labels) crosses from the host each micro-step, and the per-row losses come back.
type Trainer struct {
	Eng   *dp.Engine
	Dev   *Device
	Data  mlp.Dataset
	Batch int

	dims   []int
	x      transport.Buffer   // batch x dims[0]
	labels transport.Buffer   // batch int32
	acts   []transport.Buffer // acts[l]: layer l's input (acts[0] = x), acts[L] the logits
	deltas []transport.Buffer // deltas[l]: gradient with respect to acts[l] (deltas[0] unused)
	rowl   transport.Buffer   // batch float64 loss terms
	// float32 scratch for 16-bit working types: the model computes in float32.
	pw, pb, gw, gb []transport.Buffer

	hx     []float32
	hl     []int32
	hrow   []float64
	bufs   []transport.Buffer
	f32Eng bool
}

// NewTrainer checks that eng holds model's parameters on dev and allocates the
// activations for batch samples.
func NewTrainer(eng *dp.Engine, dev *Device, model *mlp.MLP, data mlp.Dataset, batch int) (*Trainer, error) {
	dims := model.Dims()
	if batch < 0 {
		return nil, fmt.Errorf("dp/cuda: batch %d (want >= 0)", batch)
	}
	if data.Dim() != dims[0] || data.Classes() != dims[len(dims)-1] {
		return nil, fmt.Errorf("dp/cuda: data has %d features and %d classes but the model is %v", data.Dim(), data.Classes(), dims)
	}
	if eng.NumParams() != 2*model.Layers() {
		return nil, fmt.Errorf("dp/cuda: engine holds %d tensors, the model has %d", eng.NumParams(), 2*model.Layers())
	}
	if eng.Device() != dp.Device(dev) {
		return nil, fmt.Errorf("dp/cuda: %w: the engine's buffers are on %s, not %s", transport.ErrInvalid, eng.Device(), dev)
	}
	L := len(dims) - 1
	t := &Trainer{Eng: eng, Dev: dev, Data: data, Batch: batch, dims: dims, acts: make([]transport.Buffer, L+1),
		deltas: make([]transport.Buffer, L+1), hx: make([]float32, batch*dims[0]), hl: make([]int32, batch),
		hrow: make([]float64, batch), f32Eng: eng.DType() == transport.Float32}
	var err error // the first allocation failure
	alloc := func(dt transport.DType, n int) transport.Buffer {
		b, e := dev.Alloc(dt, n)
		if e != nil && err == nil {
			err = e
		}
		t.bufs = append(t.bufs, b)
		return b
	}
	t.x = alloc(transport.Float32, batch*dims[0])
	t.labels = alloc(transport.Float32, batch) // int32s: same size
	t.rowl = alloc(transport.Float32, 2*batch) // float64s
	t.acts[0] = t.x
	for l := 1; l <= L; l++ {
		t.acts[l] = alloc(transport.Float32, batch*dims[l])
		t.deltas[l] = alloc(transport.Float32, batch*dims[l])
	}
	if !t.f32Eng {
		for l := range L {
			in, out := dims[l], dims[l+1]
			t.pw, t.pb = append(t.pw, alloc(transport.Float32, out*in)), append(t.pb, alloc(transport.Float32, out))
			t.gw, t.gb = append(t.gw, alloc(transport.Float32, out*in)), append(t.gb, alloc(transport.Float32, out))
		}
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Close frees the activations.
func (t *Trainer) Close() {
	for _, b := range t.bufs {
		t.Dev.Free(b)
	}
	t.bufs = nil
}

// load uploads this rank's micro-batch: the sample indices of mlp.Trainer.
func (t *Trainer) load(ctx context.Context, step, micro int) error {
	A, W, r, b := t.Eng.AccumSteps(), t.Eng.World(), t.Eng.Rank(), t.Batch
	base := ((step*A+micro)*W + r) * b
	d := t.Data.Dim()
	for i := range b {
		t.hl[i] = int32(t.Data.Sample(base+i, t.hx[i*d:(i+1)*d]))
	}
	if err := t.Dev.Upload(ctx, t.x, f32Bytes(t.hx)); err != nil {
		return err
	}
	return t.Dev.Upload(ctx, t.labels, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(t.hl))), 4*len(t.hl)))
}

// params returns layer l's float32 weight and bias device pointers (widened into
// scratch for 16-bit working types).
func (t *Trainer) params(l int) (w, b uintptr, err error) {
	pw, err := t.Eng.Param(2 * l)
	if err != nil {
		return 0, 0, err
	}
	pb, err := t.Eng.Param(2*l + 1)
	if err != nil {
		return 0, 0, err
	}
	if t.f32Eng {
		return pw.Ptr(), pb.Ptr(), nil
	}
	dt := t.Eng.DType()
	if err := t.Dev.Cast(t.pw[l], transport.Float32, pw, dt, t.pw[l].Len()/4, 1, false); err != nil {
		return 0, 0, err
	}
	if err := t.Dev.Cast(t.pb[l], transport.Float32, pb, dt, t.pb[l].Len()/4, 1, false); err != nil {
		return 0, 0, err
	}
	return t.pw[l].Ptr(), t.pb[l].Ptr(), nil
}

// forward computes acts[l+1] = relu(acts[l] W^T + b) (no ReLU on the logits). In
// cuBLAS's column-major terms the row-major product is Y^T = W·X^T, with W stored as
// its transpose: Sgemm(T, N, out, n, in).
func (t *Trainer) forward(l int, w, b uintptr) error {
	in, out, n := t.dims[l], t.dims[l+1], t.Batch
	k, y := t.Dev.k, t.acts[l+1].Ptr()
	if err := k.BiasRows(t.Dev.s, y, b, n, out); err != nil {
		return err
	}
	if err := t.Dev.h.Sgemm(cublas.Trans, cublas.NoTrans, out, n, in, 1, w, in, t.acts[l].Ptr(), in, 1, y, out); err != nil {
		return err
	}
	if l < len(t.dims)-2 {
		return k.ReLU(t.Dev.s, y, n*out)
	}
	return nil
}

// loss runs softmax cross-entropy on the device and sums the row terms on the host in
// row order, in float64, as mlp.MLP.Loss does.
func (t *Trainer) loss(ctx context.Context, scale float32) (float64, error) {
	L, n := len(t.dims)-1, t.Batch
	if err := t.Dev.k.SoftmaxXent(t.Dev.s, t.acts[L].Ptr(), t.labels.Ptr(), t.deltas[L].Ptr(), t.rowl.Ptr(), n, t.dims[L], scale); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	if err := t.Dev.Download(ctx, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(t.hrow))), 8*n), t.rowl); err != nil {
		return 0, err
	}
	var total float64
	for _, v := range t.hrow {
		total += v
	}
	return total / float64(n), nil
}

// backward adds layer l's gradients into the engine (dW += dY^T X as Sgemm(N, T, in,
// out, n); db += column sums of dY), marks them ready, and propagates dX = dY W
// (Sgemm(N, N, in, n, out)) through the ReLU below.
func (t *Trainer) backward(ctx context.Context, l int, w uintptr) error {
	in, out, n := t.dims[l], t.dims[l+1], t.Batch
	gw, err := t.Eng.Grad(2 * l)
	if err != nil {
		return err
	}
	gb, err := t.Eng.Grad(2*l + 1)
	if err != nil {
		return err
	}
	dw, db := gw.Ptr(), gb.Ptr()
	if !t.f32Eng {
		if err := t.Dev.Zero(t.gw[l], transport.Float32, out*in); err != nil {
			return err
		}
		if err := t.Dev.Zero(t.gb[l], transport.Float32, out); err != nil {
			return err
		}
		dw, db = t.gw[l].Ptr(), t.gb[l].Ptr()
	}
	dy, x := t.deltas[l+1].Ptr(), t.acts[l].Ptr()
	if n > 0 {
		if err := t.Dev.h.Sgemm(cublas.NoTrans, cublas.Trans, in, out, n, 1, x, in, dy, out, 1, dw, in); err != nil {
			return err
		}
	}
	if err := t.Dev.k.ColSum(t.Dev.s, db, dy, n, out); err != nil {
		return err
	}
	if !t.f32Eng {
		dt := t.Eng.DType()
		if err := t.Dev.Cast(gw, dt, t.gw[l], transport.Float32, out*in, 1, true); err != nil {
			return err
		}
		if err := t.Dev.Cast(gb, dt, t.gb[l], transport.Float32, out, 1, true); err != nil {
			return err
		}
	}
	if err := t.Dev.sync(ctx); err != nil { // the gradient collective reads them next
		return err
	}
	if err := t.Eng.MarkReady(ctx, 2*l+1); err != nil {
		return err
	}
	if err := t.Eng.MarkReady(ctx, 2*l); err != nil {
		return err
	}
	if l == 0 || n == 0 {
		return nil
	}
	dx := t.deltas[l].Ptr()
	if err := t.Dev.h.Sgemm(cublas.NoTrans, cublas.NoTrans, in, n, out, 1, w, in, dy, out, 0, dx, in); err != nil {
		return err
	}
	return t.Dev.k.ReLUMask(t.Dev.s, dx, t.acts[l].Ptr(), n*in)
}

// MicroStep runs one forward and backward pass and Wait; it returns the loss.
func (t *Trainer) MicroStep(ctx context.Context, step, micro int, st *mlp.StepTimes) (float64, error) {
	if err := t.load(ctx, step, micro); err != nil {
		return 0, err
	}
	L := len(t.dims) - 1
	t0 := time.Now()
	for l := range L {
		if err := t.Eng.BeginForward(ctx, l); err != nil {
			return 0, err
		}
		w, b, err := t.params(l)
		if err != nil {
			return 0, err
		}
		if err := t.forward(l, w, b); err != nil {
			return 0, err
		}
		if err := t.Dev.sync(ctx); err != nil { // ZeRO-3 frees the layer next
			return 0, err
		}
		if err := t.Eng.EndForward(ctx, l); err != nil {
			return 0, err
		}
	}
	loss, err := t.loss(ctx, t.Eng.LossScale()/float32(t.Eng.AccumSteps()))
	if err != nil {
		return 0, err
	}
	t1 := time.Now()
	for l := L - 1; l >= 0; l-- {
		if err := t.Eng.BeginBackward(ctx, l); err != nil {
			return 0, err
		}
		w, _, err := t.params(l)
		if err != nil {
			return 0, err
		}
		if err := t.backward(ctx, l, w); err != nil {
			return 0, err
		}
		if err := t.Dev.sync(ctx); err != nil {
			return 0, err
		}
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

// Step runs the step's micro-steps and the optimizer, like mlp.Trainer.Step.
func (t *Trainer) Step(ctx context.Context, step int, sync bool) (mlp.StepTimes, error) {
	return mlp.RunStep(ctx, t.Eng, sync, func(a int, st *mlp.StepTimes) (float64, error) { return t.MicroStep(ctx, step, a, st) })
}

func f32Bytes(xs []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), 4*len(xs))
}
