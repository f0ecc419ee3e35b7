//go:build linux

package shm

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// Single-copy transfers: the sender posts the address and length of its payload in a
// kindSingle record and waits; the receiver copies the payload straight from the
// sender's address space into its destination with process_vm_readv (Linux CMA, what
// Open MPI's vader calls "cma"), then releases the record, which is the sender's ack.
// That is one copy instead of the ring's two, and no ring space.
//
// The kernel allows it when the reader may ptrace the sender: same uid, and under Yama
// ptrace_scope=1 only when the sender named it (PR_SET_PTRACER). Sibling ranks are not
// each other's ancestors, so every endpoint that may use single-copy sets its ptracer
// to "any" (the same trade-off Open MPI makes). Containers' seccomp profiles often deny
// the call outright; the receiver then reports scRefused and the sender resends
// through the ring.

var ptracerOnce sync.Once

// allowPtrace lets same-uid processes read this one. Without Yama the call fails with
// EINVAL and is not needed.
func allowPtrace() {
	ptracerOnce.Do(func() { _ = unix.Prctl(unix.PR_SET_PTRACER, ^uintptr(0), 0, 0, 0) })
}

// processVMReadv is the system call; tests replace it to play a kernel that refuses.
var processVMReadv = unix.ProcessVMReadv

// readRemote copies len(dst) bytes at addr in process pid into dst, looping over
// short reads.
func readRemote(readv func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error), pid int, dst []byte, addr uint64) error {
	for len(dst) > 0 {
		local := []unix.Iovec{{Base: &dst[0]}}
		local[0].SetLen(len(dst))
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(dst)}}
		n, err := readv(pid, local, remote, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return unix.EFAULT
		}
		dst = dst[n:]
		addr += uint64(n)
	}
	return nil
}

// refusedByKernel reports an error that means "this kernel or sandbox does not allow
// single-copy", as opposed to a peer that went away or a bad address.
func refusedByKernel(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EACCES)
}
