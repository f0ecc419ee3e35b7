package tcp

import (
	"syscall"
	"unsafe"
)

// yield gives this thread's CPU to any other runnable thread (sched_yield).
func yield() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// rawMax is the largest read or write that goes through rawRead or rawWritev.
const rawMax = readBuf

// rawRead is read(2) on a non-blocking socket without the runtime's system-call
// bookkeeping, for at most rawMax bytes. syscall.Read tells the scheduler the thread
// may block; with one P per rank (the launcher's GOMAXPROCS) that bookkeeping, and the
// P's hand-off to another thread when sysmon finds the call still running, made an
// 8-byte AllReduce over loopback 17.0 us against 12.7 without it at 2 ranks, and 77.6
// against 64.4 at 4 (BENCHMARKS.md, "Speed", 15). A non-blocking read never blocks, and
// a few tens of kilobytes are copied in microseconds; larger reads keep syscall.Read,
// so that a long copy lets the rank's other goroutines run meanwhile.
func rawRead(fd int, p []byte) (int, error) {
	if len(p) == 0 || len(p) > rawMax {
		return syscall.Read(fd, p)
	}
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// rawWritev is writev(2) of cnt buffers on a non-blocking socket, as rawRead is read(2):
// without the bookkeeping when they hold at most rawMax bytes.
func rawWritev(fd int, iov *syscall.Iovec, cnt, bytes int) (uintptr, syscall.Errno) {
	if bytes > rawMax {
		r, _, e := syscall.Syscall(syscall.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(iov)), uintptr(cnt))
		return r, e
	}
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(iov)), uintptr(cnt))
	return r, e
}
