package transport

import (
	"fmt"
	"unsafe"
)

// MemKind says where a Buffer's bytes live.
type MemKind uint8

const (
	// Host memory addressable by Go.
	Host MemKind = iota
	// Device memory (a CUDA pointer); only the nccl package and staging code touch it.
	Device
)

// Buffer describes a collective's memory: a Go byte slice on the host, or a device
// pointer (never a Go pointer) and its length.
type Buffer struct {
	host   []byte
	ptr    uintptr
	n      int
	kind   MemKind
	device int
}

// HostBuffer wraps host memory.
func HostBuffer(b []byte) Buffer { return Buffer{host: b, n: len(b), kind: Host} }

// DeviceBuffer wraps n bytes of device memory at ptr on the given device ordinal.
func DeviceBuffer(ptr uintptr, n int, device int) Buffer {
	return Buffer{ptr: ptr, n: n, kind: Device, device: device}
}

// Kind is Host or Device.
func (b Buffer) Kind() MemKind { return b.kind }

// Len is the buffer's size in bytes.
func (b Buffer) Len() int { return b.n }

// Bytes returns the host slice; it is nil for device buffers.
func (b Buffer) Bytes() []byte { return b.host }

// Ptr returns the device pointer (0 for host buffers).
func (b Buffer) Ptr() uintptr { return b.ptr }

// DeviceOrdinal is the CUDA device of a device buffer.
func (b Buffer) DeviceOrdinal() int { return b.device }

// Slice returns the sub-buffer [off, off+n).
func (b Buffer) Slice(off, n int) (Buffer, error) {
	if off < 0 || n < 0 || off+n > b.n {
		return Buffer{}, fmt.Errorf("%w: slice [%d, %d) of a %d-byte buffer", ErrInvalid, off, off+n, b.n)
	}
	if b.kind == Host {
		return HostBuffer(b.host[off : off+n : off+n]), nil
	}
	return DeviceBuffer(b.ptr+uintptr(off), n, b.device), nil
}

// Same reports whether a and b start at the same memory (NCCL's in-place test).
func Same(a, b Buffer) bool {
	if a.kind != b.kind {
		return false
	}
	if a.kind == Device {
		return a.ptr == b.ptr
	}
	pa, pb := unsafe.SliceData(a.host), unsafe.SliceData(b.host)
	return pa != nil && pa == pb
}
