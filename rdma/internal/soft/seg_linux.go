//go:build linux

package soft

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seg is a shared mapping of a memfd: either one this process created (fd >= 0 stays
// open so peers can reopen it through /proc) or a peer's one (fd closed after mmap).
type seg struct {
	fd   int
	mem  []byte
	race *uint64 // race builds: the memfd's counter on the Go heap (race_on_linux.go)
}

func pageRound(n int) int {
	p := os.Getpagesize()
	return (n + p - 1) / p * p
}

// newSeg creates a zero-filled memfd of at least n bytes and maps it.
func newSeg(name string, n int) (*seg, error) {
	n = pageRound(max(n, 1))
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("soft: memfd_create %s: %w", name, err)
	}
	// Fallocate rather than Ftruncate so a full tmpfs fails here, not with SIGBUS later.
	if err := unix.Fallocate(fd, 0, 0, int64(n)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("soft: allocate %d bytes for %s: %w", n, name, err)
	}
	mem, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("soft: map %s: %w", name, err)
	}
	return &seg{fd: fd, mem: mem, race: raceToken(os.Getpid(), fd)}, nil
}

// openSeg maps a peer's memfd, reached as /proc/<pid>/fd/<fd>.
func openSeg(pid, fd int) (*seg, error) {
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
	f, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("soft: open peer segment %s: %w", path, err)
	}
	defer unix.Close(f)
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		return nil, fmt.Errorf("soft: stat %s: %w", path, err)
	}
	if st.Size <= 0 {
		return nil, fmt.Errorf("soft: peer segment %s is empty", path)
	}
	mem, err := unix.Mmap(f, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("soft: map %s: %w", path, err)
	}
	return &seg{fd: -1, mem: mem, race: raceToken(pid, fd)}, nil
}

func (s *seg) close() error {
	if s == nil || s.mem == nil {
		return nil
	}
	err := unix.Munmap(s.mem)
	s.mem = nil
	if s.fd >= 0 {
		raceForget(os.Getpid(), s.fd)
		unix.Close(s.fd)
		s.fd = -1
	}
	return err
}

// Words in shared memory are accessed only through sync/atomic; the offsets used are
// multiples of 8 in a page-aligned mapping.
func (s *seg) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }
func (s *seg) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&s.mem[off])) }

func (s *seg) load64(off int) uint64     { return atomic.LoadUint64(s.u64(off)) }
func (s *seg) store64(off int, v uint64) { atomic.StoreUint64(s.u64(off), v) }
func (s *seg) load32(off int) uint32     { return atomic.LoadUint32(s.u32(off)) }
func (s *seg) store32(off int, v uint32) { atomic.StoreUint32(s.u32(off), v) }

const (
	futexWait = 0 // FUTEX_WAIT, shared (no FUTEX_PRIVATE_FLAG: the word is in a MAP_SHARED memfd)
	futexWake = 1
)

func futexWaitOn(word *uint32, val uint32, d int64) {
	ts := unix.NsecToTimespec(d)
	// EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look again"; the caller does.
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWait, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

func futexWakeAll(word *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWake, uintptr(1<<30), 0, 0, 0)
}

// peerWatch reports whether a peer process has exited, through a pidfd (no pid reuse race).
type peerWatch struct{ fd int }

func watchPeer(pid int) (*peerWatch, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("soft: pidfd_open %d: %w", pid, err)
	}
	return &peerWatch{fd: fd}, nil
}

func (w *peerWatch) exited() bool {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
}

func (w *peerWatch) close() {
	if w != nil && w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}
