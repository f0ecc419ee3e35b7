package kernels_test

import (
	"context"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/nccl/kernels"
	"github.com/goccl/goccl/nccl/kernels/kerneltest"
)

var fx *kerneltest.Fixture

func TestMain(m *testing.M) {
	fx = kerneltest.NewFixture()
	code := m.Run()
	fx.Close()
	os.Exit(code)
}

// env is a loaded training and reduction kernel set on fake device dev, with a stream.
type env struct {
	st     *kerneltest.Stack
	dev    cuda.Device
	s      *cuda.Stream
	train  *kernels.Set
	reduce *kernels.Set
	log    string
	t      *testing.T
	allocs []uintptr
}

func newEnv(t *testing.T, ord int) *env {
	st, log := fx.Require(t)
	dev, err := st.Runtime.Device(st.Ordinal(ord))
	require.NoError(t, err)
	s, err := dev.NewStream()
	require.NoError(t, err)
	e := &env{st: st, dev: dev, s: s, log: log, t: t}
	e.train, err = kernels.Load(dev, st.Driver, st.NVRTC, kernels.Training)
	require.NoError(t, err)
	e.reduce, err = kernels.Load(dev, st.Driver, st.NVRTC, kernels.Reductions)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, p := range e.allocs {
			dev.Free(p)
		}
		s.Destroy()
	})
	return e
}

// upload copies a Go slice into fresh device memory.
func upload[T any](e *env, xs []T) uintptr {
	n := len(xs) * int(unsafe.Sizeof(*new(T)))
	p, err := e.dev.Malloc(n)
	require.NoError(e.t, err)
	e.allocs = append(e.allocs, p)
	if n > 0 {
		require.NoError(e.t, e.dev.CopyHtoD(p, unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), n)))
	}
	return p
}

// download reads n elements back after the stream has drained.
func download[T any](e *env, p uintptr, n int) []T {
	e.sync()
	out := make([]T, n)
	if n > 0 {
		require.NoError(e.t, e.dev.CopyDtoH(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), n*int(unsafe.Sizeof(out[0]))), p))
	}
	return out
}

func (e *env) sync() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(e.t, e.s.Synchronize(ctx))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}
