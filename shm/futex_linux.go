//go:build linux

package shm

import (
	"errors"
	"math"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations. x/sys has no constants for them. The PRIVATE flag must stay off:
// the words live in memory shared between processes.
const (
	futexWaitOp = 0
	futexWakeOp = 1
)

// futexWait sleeps while *addr == val, for at most d. Every outcome (woken, value
// changed, interrupted, timed out) means "check again", so it returns nothing.
func futexWait(addr *uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every process sleeping on addr.
func futexWake(addr *uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, math.MaxInt32, 0, 0, 0)
}

// osYield gives the CPU to another runnable thread of any process. runtime.Gosched only
// yields to goroutines of this process, which does not help a peer process that needs
// this core.
func osYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// procyield runs cycles PAUSE instructions: a spin-wait hint that slows the polling
// core down without giving up the CPU (the runtime's own spin loops use it).
//
//go:linkname procyield runtime.procyield
func procyield(cycles uint32)

// pidWatch tells whether a peer process still runs. A pidfd becomes readable when the
// process exits, zombie or not, and never names a recycled pid; where pidfds are not
// available it falls back to kill(pid, 0).
type pidWatch struct {
	pid int
	fd  int
}

func watchPid(pid int) *pidWatch {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		fd = -1
	}
	return &pidWatch{pid: pid, fd: fd}
}

func (w *pidWatch) alive() bool {
	if w.fd >= 0 {
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err == nil {
				return n == 0
			}
			break
		}
	}
	err := unix.Kill(w.pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

func (w *pidWatch) close() {
	if w.fd >= 0 {
		_ = unix.Close(w.fd)
		w.fd = -1
	}
}
