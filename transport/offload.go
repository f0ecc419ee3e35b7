package transport

import (
	"context"
	"fmt"
	"sync"
)

// Collective is one whole collective call, handed to an Offloader.
type Collective struct {
	Kind       Kind
	Send, Recv Buffer
	Count      int // NCCL's counting (per rank for AllGather/ReduceScatter/Gather/Scatter, per peer for AllToAll)
	DType      DType
	Op         Op
	Root       int // root, or the peer for KindSendRecv
	// SendPeer and RecvPeer are the ranks for KindSendRecv (-1 = none).
	SendPeer, RecvPeer int
	// SendCounts and RecvCounts are KindAllToAllV's elements to and from each rank,
	// packed in rank order in Send and Recv (Count is unused).
	SendCounts, RecvCounts []int
}

// Offloader is an optional Endpoint ability: run whole collectives natively, as NCCL
// does. The communicator uses it when the algorithm "nccl" (or the transport's name)
// is selected and every link goes through that endpoint's transport.
type Offloader interface {
	// Offloads reports whether kind runs natively.
	Offloads(kind Kind) bool
	// Offload runs c on every rank of the communicator.
	Offload(ctx context.Context, c *Collective) error
}

// Stager moves device memory to and from host memory, so host-only transports can
// carry device buffers. The nccl package registers one when a CUDA runtime loads.
type Stager interface {
	// ToHost copies len(dst) bytes from device buffer src into dst.
	ToHost(ctx context.Context, dst []byte, src Buffer) error
	// FromHost copies src into device buffer dst.
	FromHost(ctx context.Context, dst Buffer, src []byte) error
	// PinnedAlloc returns n bytes of page-locked host memory and a function that gives it
	// back (the stager may keep it for the next call).
	PinnedAlloc(n int) ([]byte, func(), error)
}

var (
	stagerMu sync.RWMutex
	stager   func() (Stager, error)
)

// RegisterStager installs the function that provides device staging (called lazily,
// because loading a CUDA runtime is slow and may fail), and returns the one it replaces
// (nil if none), so that a test can put it back.
func RegisterStager(f func() (Stager, error)) (prev func() (Stager, error)) {
	stagerMu.Lock()
	prev, stager = stager, f
	stagerMu.Unlock()
	return prev
}

// DeviceStager returns the registered Stager, or an error wrapping ErrNotSupported.
func DeviceStager() (Stager, error) {
	stagerMu.RLock()
	f := stager
	stagerMu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("transport: device buffers: %w: no CUDA runtime registered (import github.com/goccl/goccl/nccl)", ErrNotSupported)
	}
	return f()
}
