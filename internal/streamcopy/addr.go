package streamcopy

import "unsafe"

// addr is where b's data starts.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
