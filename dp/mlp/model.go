package mlp

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/goccl/goccl/dp"
)

var gemm = gonum.Implementation{}

// MLP is a multi-layer perceptron classifier: Linear layers with ReLU between them
// and softmax cross-entropy on the last. Weights are PyTorch-shaped (out x in,
// row-major), so one layer's weight and bias are two tensors of its Specs. The model
// owns only activations; parameters and gradients are bound per layer (Bind,
// BindGrads) to whatever memory the caller holds them in, such as dp's flat buffers.
type MLP struct {
	dims   []int
	w, b   [][]float32 // bound parameters per layer
	dw, db [][]float32 // bound gradients per layer
	acts   [][]float32 // acts[l] is layer l's input (acts[0] the batch), acts[L] the logits
	deltas [][]float32 // deltas[l] is the loss gradient with respect to acts[l]
	batch  int
}

// New makes an MLP with dims[0] inputs, dims[len-1] classes and the sizes between as
// hidden layers.
func New(dims []int) (*MLP, error) {
	if len(dims) < 2 {
		return nil, fmt.Errorf("mlp: %d layer sizes %v (want at least an input and an output size)", len(dims), dims)
	}
	for i, d := range dims {
		if d < 1 {
			return nil, fmt.Errorf("mlp: layer size %d at position %d of %v (want >= 1)", d, i, dims)
		}
	}
	if dims[len(dims)-1] < 2 {
		return nil, fmt.Errorf("mlp: %d classes (want >= 2)", dims[len(dims)-1])
	}
	if _, err := CountParams(dims); err != nil {
		return nil, err
	}
	L := len(dims) - 1
	m := &MLP{dims: append([]int(nil), dims...), w: make([][]float32, L), b: make([][]float32, L),
		dw: make([][]float32, L), db: make([][]float32, L), acts: make([][]float32, L+1), deltas: make([][]float32, L+1)}
	return m, nil
}

// Layers is the number of Linear layers.
func (m *MLP) Layers() int { return len(m.dims) - 1 }

// Dims returns the layer sizes.
func (m *MLP) Dims() []int { return append([]int(nil), m.dims...) }

// MaxParams bounds a model's parameters (2^40, 16 TiB of float32 weights and AdamW
// state: far past any host), so that counting them cannot overflow.
const MaxParams = 1 << 40

// CountParams is the number of parameters of an MLP with these layer sizes, or an
// error when a size is below 1 or the count would pass MaxParams.
func CountParams(dims []int) (int, error) {
	n := 0
	for i, d := range dims {
		if d < 1 || d > MaxParams {
			return 0, fmt.Errorf("mlp: layer size %d at position %d of %v (want 1..%d)", d, i, dims, MaxParams)
		}
		if i == 0 {
			continue
		}
		// (in+1)*out, checked before it is formed: both are at most MaxParams.
		if in := dims[i-1]; in+1 > (MaxParams-n)/d {
			return 0, fmt.Errorf("mlp: layer sizes %v have more than %d parameters", dims, MaxParams)
		}
		n += (dims[i-1] + 1) * d
	}
	return n, nil
}

// NumParams is the number of parameters.
func (m *MLP) NumParams() int {
	n := 0
	for l := range m.Layers() {
		n += m.dims[l+1]*m.dims[l] + m.dims[l+1]
	}
	return n
}

// Specs registers the parameters for dp in PyTorch's order (fc0.weight, fc0.bias,
// fc1.weight, ...), with nn.Linear's default initialisation U(-1/sqrt(in), 1/sqrt(in))
// drawn from a generator seeded with seed.
func (m *MLP) Specs(seed uint64) []dp.Spec {
	rng := rand.New(rand.NewPCG(seed, 0x6d6c70))
	var specs []dp.Spec
	for l := range m.Layers() {
		in, out := m.dims[l], m.dims[l+1]
		bound := 1 / math.Sqrt(float64(in))
		w, b := make([]float32, out*in), make([]float32, out)
		for i := range w {
			w[i] = float32((2*rng.Float64() - 1) * bound)
		}
		for i := range b {
			b[i] = float32((2*rng.Float64() - 1) * bound)
		}
		specs = append(specs, dp.Spec{Name: fmt.Sprintf("fc%d.weight", l), Len: len(w), Layer: l, Init: w},
			dp.Spec{Name: fmt.Sprintf("fc%d.bias", l), Len: len(b), Layer: l, Init: b})
	}
	return specs
}

// Bind points layer l at its weight (out x in) and bias.
func (m *MLP) Bind(l int, w, b []float32) { m.w[l], m.b[l] = w, b }

// BindGrads points layer l at the buffers its gradients are added into.
func (m *MLP) BindGrads(l int, dw, db []float32) { m.dw[l], m.db[l] = dw, db }

// SetBatch installs a batch of n inputs (n x dims[0], row-major).
func (m *MLP) SetBatch(x []float32, n int) {
	m.batch = n
	m.acts[0] = x[:n*m.dims[0]]
	for l := 1; l <= m.Layers(); l++ {
		m.acts[l] = grow(m.acts[l], n*m.dims[l])
		m.deltas[l] = grow(m.deltas[l], n*m.dims[l])
	}
	m.deltas[0] = nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// Forward computes layer l: acts[l+1] = relu(acts[l] W^T + b), without the ReLU on the
// last layer (its output is the logits).
func (m *MLP) Forward(l int) {
	in, out, n := m.dims[l], m.dims[l+1], m.batch
	x, y := m.acts[l], m.acts[l+1]
	for i := range n {
		copy(y[i*out:(i+1)*out], m.b[l])
	}
	if n > 0 {
		gemm.Sgemm(blas.NoTrans, blas.Trans, n, out, in, 1, x, in, m.w[l], in, 1, y, out)
	}
	if l < m.Layers()-1 {
		for i, v := range y {
			if v < 0 {
				y[i] = 0
			}
		}
	}
}

// Loss is the mean softmax cross-entropy of the logits against labels. It leaves the
// gradient of scale*loss with respect to the logits for backward; scale folds in
// gradient accumulation (1/A) and fp16 loss scaling.
func (m *MLP) Loss(labels []int, scale float32) float64 {
	L, c, n := m.Layers(), m.dims[len(m.dims)-1], m.batch
	logits, d := m.acts[L], m.deltas[L]
	var total float64
	for i := range n {
		row, dr := logits[i*c:(i+1)*c], d[i*c:(i+1)*c]
		mx := row[0]
		for _, v := range row {
			mx = max(mx, v)
		}
		var sum float64
		for j, v := range row {
			e := math.Exp(float64(v - mx))
			dr[j] = float32(e)
			sum += e
		}
		total += math.Log(sum) - float64(row[labels[i]]-mx)
		k := scale / float32(n) / float32(sum)
		for j := range dr {
			dr[j] *= k
		}
		dr[labels[i]] -= scale / float32(n)
	}
	if n == 0 {
		return 0
	}
	return total / float64(n)
}

// BackwardParams adds layer l's weight and bias gradients (dW += dY^T X, db += sum dY).
func (m *MLP) BackwardParams(l int) {
	in, out, n := m.dims[l], m.dims[l+1], m.batch
	dy, x := m.deltas[l+1], m.acts[l]
	if n > 0 {
		gemm.Sgemm(blas.Trans, blas.NoTrans, out, in, n, 1, dy, out, x, in, 1, m.dw[l], in)
	}
	db := m.db[l][:out]
	for i := range n {
		for j, v := range dy[i*out : (i+1)*out] {
			db[j] += v
		}
	}
}

// BackwardInput propagates the gradient to layer l's input (dX = dY W, through the
// ReLU that produced it); layer 0 has nothing below it.
func (m *MLP) BackwardInput(l int) {
	if l == 0 || m.batch == 0 {
		return
	}
	in, out, n := m.dims[l], m.dims[l+1], m.batch
	dx := m.deltas[l]
	gemm.Sgemm(blas.NoTrans, blas.NoTrans, n, in, out, 1, m.deltas[l+1], out, m.w[l], in, 0, dx, in)
	for i, a := range m.acts[l] {
		if a <= 0 {
			dx[i] = 0
		}
	}
}

// Logits returns the last forward's outputs (batch x classes).
func (m *MLP) Logits() []float32 { return m.acts[m.Layers()] }
