//go:build linux

package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/transport"
)

// A Window is memory that the ranks of one host share: one rank creates it as a file in
// the segment directory and writes it, the others map it read-only, and collectives read
// each other's buffers in it directly instead of passing them through a ring (the
// communicator's AllocShared, like MPI_Win_allocate_shared or NCCL's symmetric windows).
// Its name is deterministic, so it needs no rendezvous, and it starts with the
// communicator's segment prefix, so RemoveSegments sweeps it too.
type Window struct {
	mem  []byte // what Mmap returned
	n    int    // bytes asked for (mem is rounded up to whole pages)
	path string
}

// windowName names allocation index of rank in commID.
func windowName(commID string, index, rank int) string {
	return fmt.Sprintf("%sw%d-r%d", segPrefix(commID), index, rank)
}

// CreateWindow creates and maps this rank's part of allocation index: n bytes, every
// page allocated and touched (a window is as fast on its first use as later, see
// prefault, and a full directory fails here, not with SIGBUS later). Peers map it with
// OpenWindow; the creator removes the name with Unlink once they have.
func CreateWindow(dir, commID string, index, rank, n int) (*Window, error) {
	if dir == "" {
		dir = defaultDir
	}
	if n <= 0 {
		return nil, fmt.Errorf("shm: %w: a window of %d bytes (want at least 1)", transport.ErrInvalid, n)
	}
	mem, path, err := createMapped(dir, windowName(commID, index, rank), "window", pageRound(n))
	if err != nil {
		return nil, err
	}
	return &Window{mem: mem, n: n, path: path}, nil
}

// OpenWindow maps rank's part of allocation index read-only. It must be n bytes, as the
// creator made it.
func OpenWindow(dir, commID string, index, rank, n int) (*Window, error) {
	if dir == "" {
		dir = defaultDir
	}
	path := filepath.Join(dir, windowName(commID, index, rank))
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: open rank %d's window %s: %w", rank, path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: stat window %s: %w", path, err)
	}
	size := pageRound(n)
	if st.Size != int64(size) {
		return nil, fmt.Errorf("shm: window %s: %w: %d bytes, want %d (ranks asked for different sizes?)", path, transport.ErrProtocol, st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("shm: map rank %d's window %s (%d bytes): %w", rank, path, size, err)
	}
	prefault(mem)
	return &Window{mem: mem, n: n, path: path}, nil
}

func pageRound(n int) int {
	p := os.Getpagesize()
	return (n + p - 1) / p * p
}

// Bytes is the window's memory, exactly the n bytes asked for. It is valid until Close.
func (w *Window) Bytes() []byte { return w.mem[:w.n:w.n] }

// Unlink removes the window's name; mappings stay valid. Removing a missing name is
// not an error.
func (w *Window) Unlink() error {
	if err := unix.Unlink(w.path); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("shm: unlink window %s: %w", w.path, err)
	}
	return nil
}

// Close unmaps the window. Its memory must not be used afterwards.
func (w *Window) Close() error {
	if w.mem == nil {
		return nil
	}
	err := unix.Munmap(w.mem)
	w.mem = nil
	if err != nil {
		return fmt.Errorf("shm: unmap window %s: %w", w.path, err)
	}
	return nil
}

// RemoveWindows removes the names of allocation index of every rank of a world, for
// ranks that give up on the allocation (a peer failed or died before removing its own):
// nobody opens them afterwards, and mappings stay valid. Missing names are not errors.
func RemoveWindows(dir, commID string, index, world int) {
	if dir == "" {
		dir = defaultDir
	}
	for r := range world {
		_ = unix.Unlink(filepath.Join(dir, windowName(commID, index, r)))
	}
}
