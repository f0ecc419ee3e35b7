//go:build !linux

package tcp

import (
	"syscall"
	"unsafe"
)

// yield is a no-op where sched_yield is not available; runtime.Gosched still runs.
func yield() {}

// rawRead is syscall.Read where the raw system call is not used (see sys_linux.go).
func rawRead(fd int, p []byte) (int, error) { return syscall.Read(fd, p) }

// rawWritev is writev(2) through syscall.Syscall (see sys_linux.go).
func rawWritev(fd int, iov *syscall.Iovec, cnt, bytes int) (uintptr, syscall.Errno) {
	r, _, e := syscall.Syscall(syscall.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(iov)), uintptr(cnt))
	return r, e
}
