//go:build !(linux && cgo)

package nccl

import (
	"fmt"

	"github.com/goccl/goccl/transport"
)

// GPUs needs NVML through cgo; this build has neither.
func GPUs() ([]GPU, error) {
	return nil, fmt.Errorf("nccl: %w: no NVIDIA driver access: built without cgo", transport.ErrNotSupported)
}

// Driver needs NVML through cgo; this build has neither.
func Driver() (string, int, error) {
	return "", 0, fmt.Errorf("nccl: %w: no NVIDIA driver access: built without cgo", transport.ErrNotSupported)
}
