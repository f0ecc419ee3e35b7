package train

import "golang.org/x/sys/unix"

// hostMemory is the host's RAM in bytes, or 0 when the kernel does not say.
func hostMemory() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
