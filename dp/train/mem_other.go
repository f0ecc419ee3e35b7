//go:build !linux

package train

// hostMemory is 0 (unknown) where sysinfo(2) is not available.
func hostMemory() uint64 { return 0 }
