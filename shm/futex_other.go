//go:build !linux

package shm

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/transport"
)

// openEndpoint: shared-memory links need Linux (futexes, process_vm_readv, /dev/shm).
func openEndpoint(context.Context, transport.Local, Options) (transport.Endpoint, error) {
	return nil, fmt.Errorf("shm: %w: the shm transport needs Linux", transport.ErrNotSupported)
}

// RemoveSegments deletes every segment name of communicator commID left in dir. Off
// Linux there are none.
func RemoveSegments(dir, commID string) (int, error) { return 0, nil }

// Window is shared memory between the ranks of a host; off Linux there is none.
type Window struct{}

// CreateWindow needs Linux.
func CreateWindow(dir, commID string, index, rank, n int) (*Window, error) {
	return nil, fmt.Errorf("shm: %w: shared windows need Linux", transport.ErrNotSupported)
}

// OpenWindow needs Linux.
func OpenWindow(dir, commID string, index, rank, n int) (*Window, error) {
	return nil, fmt.Errorf("shm: %w: shared windows need Linux", transport.ErrNotSupported)
}

// Bytes is nil off Linux.
func (w *Window) Bytes() []byte { return nil }

// Unlink does nothing off Linux.
func (w *Window) Unlink() error { return nil }

// Close does nothing off Linux.
func (w *Window) Close() error { return nil }

// RemoveWindows does nothing off Linux.
func RemoveWindows(dir, commID string, index, world int) {}
