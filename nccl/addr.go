package nccl

import "unsafe"

// addrOf is the address of p's first byte, for comparing with pinned ranges (p must be
// non-empty). The value is only compared, never turned back into a pointer.
func addrOf(p []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(p))) }
