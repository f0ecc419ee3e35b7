package dp

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/dp/optim"
	"github.com/goccl/goccl/transport"
)

// Device is where an Engine's flat buffers live and where the few element-wise kernels
// of data-parallel training run. DDP and ZeRO code above it never touches bytes
// directly: a CUDA implementation (device buffers from the nccl package) plugs in here
// without changing them. Host is the implementation for host memory.
//
// Buffers are transport.Buffers, so they go to the collectives unchanged. Counts are in
// elements of the dtype given with each call; every call checks that the buffers are
// large enough and returns an error wrapping transport.ErrInvalid otherwise.
type Device interface {
	// String names the device in errors and reports ("host", "cuda:0").
	String() string
	// Alloc returns a zeroed buffer of n elements of dt.
	Alloc(dt transport.DType, n int) (transport.Buffer, error)
	// Free releases a buffer from Alloc; the buffer must not be used afterwards.
	Free(b transport.Buffer)
	// Upload copies host bytes into a device buffer.
	Upload(ctx context.Context, dst transport.Buffer, src []byte) error
	// Download copies a device buffer into host bytes.
	Download(ctx context.Context, dst []byte, src transport.Buffer) error
	// Zero sets n elements of dt to zero.
	Zero(b transport.Buffer, dt transport.DType, n int) error
	// Cast writes dst = src*scale converted to dst's type, or dst += src*scale when
	// accumulate is set, for n elements. Types are float32, float16 or bfloat16.
	Cast(dst transport.Buffer, dt transport.DType, src transport.Buffer, st transport.DType, n int, scale float32, accumulate bool) error
	// NonFinite reports whether any of n elements of dt is Inf or NaN (fp16 loss scaling).
	NonFinite(b transport.Buffer, dt transport.DType, n int) (bool, error)
	// AdamW runs one fused AdamW update over a contiguous range (see AdamWArgs).
	AdamW(ctx context.Context, a *AdamWArgs) error
}

// AdamWArgs is one fused AdamW update over N elements: read the gradient (scaled by
// GradScale, which undoes fp16 loss scaling), update the fp32 master weights and
// moments, and write the working parameters rounded to ParamType. When Param is the
// zero Buffer the master weights are the working parameters (float32 training) and
// nothing else is written.
type AdamWArgs struct {
	N         int
	Master    transport.Buffer // float32
	M, V      transport.Buffer // float32 first and second moments
	Grad      transport.Buffer
	GradType  transport.DType
	Param     transport.Buffer
	ParamType transport.DType
	GradScale float32
	Hyper     AdamW
	Step      int // 1-based step count, for the bias corrections
}

// AdamW holds the optimizer's hyper-parameters (see optim.AdamW).
type AdamW = optim.AdamW

// DefaultAdamW is PyTorch's AdamW default (see optim.Default).
func DefaultAdamW() AdamW { return optim.Default() }

// elemView returns elements [off, off+n) of b holding dt.
func elemView(b transport.Buffer, dt transport.DType, off, n int) (transport.Buffer, error) {
	s := dt.Size()
	return b.Slice(off*s, n*s)
}

// mustView is elemView for ranges the layout has already proven in bounds.
func mustView(b transport.Buffer, dt transport.DType, off, n int) transport.Buffer {
	v, err := elemView(b, dt, off, n)
	if err != nil {
		panic("dp: internal layout error: " + err.Error())
	}
	return v
}

func workingType(dt transport.DType) error {
	switch dt {
	case transport.Float32, transport.Float16, transport.BFloat16:
		return nil
	}
	return fmt.Errorf("dp: %w: working dtype %s (valid: float32, float16, bfloat16)", transport.ErrInvalid, dt)
}
