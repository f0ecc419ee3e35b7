package cuda

import (
	"fmt"

	"github.com/goccl/goccl/transport"
)

// Error is a failed CUDA runtime call: which call, on which device, the cudaError_t
// code and the runtime's own name and text for it.
type Error struct {
	Call   string // the runtime function ("cudaMalloc")
	Device int    // the device the call ran on, -1 when it has none
	Code   int    // the cudaError_t value
	Name   string // "cudaErrorMemoryAllocation"
	Text   string // "out of memory"
	Detail string // the call's arguments worth printing ("1048576 bytes")
}

func (e *Error) Error() string {
	s := "cuda: " + e.Call
	if e.Detail != "" {
		s += "(" + e.Detail + ")"
	}
	if e.Device >= 0 {
		s += fmt.Sprintf(" on device %d", e.Device)
	}
	name, text := e.Name, e.Text
	if name == "" {
		name = ErrorName(e.Code)
	}
	s += fmt.Sprintf(": %s (%d)", name, e.Code)
	if text != "" {
		s += ": " + text
	}
	return s
}

// Unwrap maps the code onto goccl's sentinels, so callers can test errors.Is(err,
// transport.ErrNotSupported) for "no usable GPU" without knowing CUDA's numbers.
func (e *Error) Unwrap() error { return sentinel(e.Code) }

func sentinel(code int) error {
	switch code {
	case ErrInsufficientDriver, ErrNoDevice, ErrStubLibrary, ErrInitialization, ErrSystemDriverMismatch,
		ErrCompatNotSupported, ErrDevicesUnavailable, ErrNotSupportedCode:
		return transport.ErrNotSupported
	case ErrInvalidValue, ErrInvalidDevice, ErrInvalidResourceHandle, ErrInvalidMemcpyDirection:
		return transport.ErrInvalid
	case ErrCudartUnloading, ErrContextIsDestroyed:
		return transport.ErrClosed
	}
	return nil
}

// cudaError_t values the Go side reacts to (driver_types.h, CUDA 12.6).
const (
	Success                   = 0
	ErrInvalidValue           = 1
	ErrMemoryAllocation       = 2
	ErrInitialization         = 3
	ErrCudartUnloading        = 4
	ErrInvalidMemcpyDirection = 21
	ErrStubLibrary            = 34
	ErrInsufficientDriver     = 35
	ErrDevicesUnavailable     = 46
	ErrNoDevice               = 100
	ErrInvalidDevice          = 101
	ErrInvalidResourceHandle  = 400
	ErrNotReady               = 600
	ErrIllegalAddress         = 700
	ErrContextIsDestroyed     = 709
	ErrLaunchFailure          = 719
	ErrNotSupportedCode       = 801
	ErrSystemDriverMismatch   = 803
	ErrCompatNotSupported     = 804
	ErrUnknown                = 999
)

var errorNames = map[int]string{
	Success: "cudaSuccess", ErrInvalidValue: "cudaErrorInvalidValue", ErrMemoryAllocation: "cudaErrorMemoryAllocation",
	ErrInitialization: "cudaErrorInitializationError", ErrCudartUnloading: "cudaErrorCudartUnloading",
	ErrInvalidMemcpyDirection: "cudaErrorInvalidMemcpyDirection", ErrStubLibrary: "cudaErrorStubLibrary",
	ErrInsufficientDriver: "cudaErrorInsufficientDriver", ErrDevicesUnavailable: "cudaErrorDevicesUnavailable",
	ErrNoDevice: "cudaErrorNoDevice", ErrInvalidDevice: "cudaErrorInvalidDevice",
	ErrInvalidResourceHandle: "cudaErrorInvalidResourceHandle", ErrNotReady: "cudaErrorNotReady",
	ErrIllegalAddress: "cudaErrorIllegalAddress", ErrContextIsDestroyed: "cudaErrorContextIsDestroyed",
	ErrLaunchFailure: "cudaErrorLaunchFailure", ErrNotSupportedCode: "cudaErrorNotSupported",
	ErrSystemDriverMismatch: "cudaErrorSystemDriverMismatch", ErrCompatNotSupported: "cudaErrorCompatNotSupportedOnDevice",
	ErrUnknown: "cudaErrorUnknown",
}

// ErrorName is the cudaError_t name for code from a built-in table, used when the
// runtime's own cudaGetErrorName is not at hand.
func ErrorName(code int) string {
	if n, ok := errorNames[code]; ok {
		return n
	}
	return fmt.Sprintf("cudaError(%d)", code)
}
