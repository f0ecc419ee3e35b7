package kernels_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/nccl/kernels"
	"github.com/goccl/goccl/transport"
)

func TestDriverMissing(t *testing.T) {
	_, err := cuda.LoadDriver("/nonexistent/libcuda.so.1")
	require.ErrorIs(t, err, transport.ErrNotSupported)
	if dl.Supported {
		require.Contains(t, err.Error(), "cuda.driver = /nonexistent/libcuda.so.1")
	}
	require.Contains(t, cuda.DriverSpec("").Searched(), "libcuda.so.1")
	require.NotContains(t, cuda.DriverSpec("").Searched(), "stubs", "the link-time stub must never be loaded")
}

func TestDriverErrorsMapToSentinels(t *testing.T) {
	for code, want := range map[int]error{100: transport.ErrNotSupported, 34: transport.ErrNotSupported,
		209: transport.ErrNotSupported, 222: transport.ErrNotSupported, 200: transport.ErrInvalid,
		201: transport.ErrInvalid, 500: transport.ErrInvalid, 1: transport.ErrInvalid} {
		require.ErrorIs(t, &cuda.DriverError{Call: "x", Code: code, Device: 0}, want, "CUresult %d", code)
	}
	err := &cuda.DriverError{Call: "cuModuleGetFunction", Device: 1, Code: 500, Name: "CUDA_ERROR_NOT_FOUND", Detail: `"k"`}
	require.Equal(t, `cuda: cuModuleGetFunction("k") on device 1: CUDA_ERROR_NOT_FOUND (500)`, err.Error())
}

func TestArchFromDevice(t *testing.T) {
	fx.FakeOnly(t)
	st, log := fx.Require(t)
	arch, err := st.Driver.Arch(0)
	require.NoError(t, err)
	require.Equal(t, 90, arch, "the fake reports compute capability 9.0, an H200")
	dev, err := st.Runtime.Device(0)
	require.NoError(t, err)
	t.Setenv("FAKE_CC", "86")
	set, err := kernels.Load(dev, st.Driver, st.NVRTC, kernels.Training)
	require.NoError(t, err)
	defer set.Close()
	require.Equal(t, 86, set.Program().Arch)
	require.Equal(t, "cubin", set.Program().Kind)
	require.Contains(t, readFile(t, log), "--gpu-architecture=sm_86 --fmad=false")
	_, err = st.Driver.Arch(7)
	require.ErrorIs(t, err, transport.ErrInvalid)
}

// TestContextPerCall launches from many goroutines on both devices: each call must
// make its device's context current in the same C call (the fake fails with
// CUDA_ERROR_INVALID_CONTEXT otherwise, and rejects a function of the other device).
func TestContextPerCall(t *testing.T) {
	fx.FakeOnly(t)
	envs := []*env{newEnv(t, 0), newEnv(t, 1)}
	scratch := []uintptr{envs[0].allocs0(), envs[1].allocs0()}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				e, p := envs[(g+i)%2], scratch[(g+i)%2]
				if err := e.train.ReLU(e.s, 0, 0); err != nil { // n = 0: no launch at all
					errs <- err
				}
				if err := e.reduce.Avg(e.s, transport.Int32, p, 4, 2); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	perDev := map[int]int{}
	for _, l := range strings.Split(readFile(t, envs[1].log), "\n") {
		var dev int
		if _, err := fmt.Sscanf(l, "cuLaunchKernel goccl_avg_i32 dev=%d", &dev); err == nil {
			perDev[dev]++
		}
	}
	require.Equal(t, map[int]int{0: 40, 1: 40}, perDev, "each launch ran on the device it was meant for")
}

func TestModuleAndLaunchErrors(t *testing.T) {
	fx.FakeOnly(t)
	e := newEnv(t, 0)
	_, err := e.st.Driver.LoadModule(e.dev, []byte("not an image"))
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.Contains(t, err.Error(), "JIT log: fake libcuda: not an image")
	_, err = e.st.Driver.LoadModule(e.dev, nil)
	require.ErrorIs(t, err, transport.ErrInvalid)
	mod, err := e.st.Driver.LoadModule(e.dev, e.train.Program().Image)
	require.NoError(t, err)
	defer mod.Unload()
	_, err = mod.Function("no_such_kernel")
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.Contains(t, err.Error(), `declare it extern "C"`)
	f, err := mod.Function(kernels.ReLUName)
	require.NoError(t, err)
	other := newEnv(t, 1)
	require.ErrorIs(t, f.Launch(other.s, cuda.Dim(1), cuda.Dim(32), 0), transport.ErrInvalid)
	require.ErrorIs(t, f.Launch(e.s, cuda.Dim(0), cuda.Dim(32), 0), transport.ErrInvalid)
	require.ErrorIs(t, f.Launch(e.s, cuda.Dim(1), cuda.Dim(32), 0, make([]cuda.Arg, 33)...), transport.ErrInvalid)
	t.Setenv("FAKE_FAIL", "cuLaunchKernel=719")
	err = e.train.ReLU(e.s, e.allocs0(), 1)
	var de *cuda.DriverError
	require.ErrorAs(t, err, &de)
	require.Equal(t, 719, de.Code)
	require.Contains(t, err.Error(), "cuLaunchKernel(goccl_relu_f32 grid 1 block 256) on device 0")
}

// allocs0 is a small scratch allocation on the env's device.
func (e *env) allocs0() uintptr { return upload(e, []int32{7, 8, 9, 10}) }
