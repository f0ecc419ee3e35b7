package perf

import (
	"fmt"

	"github.com/goccl/goccl/nccl"
	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/transport"
)

// The CUDA hooks come from the nccl package's runtime wrapper: device buffers on the
// rank's local GPU (LOCAL_RANK modulo the device count, as the nccl transport picks),
// and nccl-tests' "[0000:18:00] NVIDIA H200" device string.
func init() {
	CUDAHooks.DeviceInfo = func(local int) (string, string, error) {
		d, err := localDevice(local)
		if err != nil {
			return "", "", err
		}
		return nccl.CUDADevice(d.Runtime(), d.Ordinal())
	}
	CUDAHooks.Alloc = func(local, n int) (transport.Buffer, func(), error) {
		d, err := localDevice(local)
		if err != nil {
			return transport.Buffer{}, nil, err
		}
		p, err := d.Malloc(max(n, 1))
		if err != nil {
			return transport.Buffer{}, nil, err
		}
		return d.Buffer(p, n), func() { d.Free(p) }, nil
	}
}

// cudaLib is the runtime library to load (GOCCL_CUDA_LIB, "" = the default search).
var cudaLib string

func localDevice(local int) (cuda.Device, error) {
	rt := cuda.Loaded()
	if rt == nil {
		var err error
		if rt, err = cuda.Load(cudaLib); err != nil {
			return cuda.Device{}, fmt.Errorf("perf: --device cuda: %w", err)
		}
	}
	n, err := rt.DeviceCount()
	if err != nil {
		return cuda.Device{}, fmt.Errorf("perf: --device cuda: %w", err)
	}
	if n == 0 {
		return cuda.Device{}, fmt.Errorf("perf: --device cuda: %w: no CUDA device", transport.ErrNotSupported)
	}
	return rt.Device(local % n)
}
