package cuda

import (
	"context"
	"fmt"
	"time"

	"github.com/goccl/goccl/transport"
)

// Device is one GPU of a Runtime. Its methods select the device themselves, so they
// may be called from any goroutine.
type Device struct {
	r   *Runtime
	ord int
}

// Ordinal is the CUDA device number.
func (d Device) Ordinal() int { return d.ord }

// Runtime is the library this device belongs to.
func (d Device) Runtime() *Runtime { return d.r }

func (d Device) err(call string, code int, detail string) error {
	return d.r.err(call, d.ord, code, detail)
}

func checkLen(what string, n int) error {
	if n < 0 {
		return fmt.Errorf("cuda: %w: %s of %d bytes", transport.ErrInvalid, what, n)
	}
	return nil
}

// Malloc allocates n bytes of device memory. The pointer is a plain address, never a
// Go pointer.
func (d Device) Malloc(n int) (uintptr, error) {
	if err := checkLen("cudaMalloc", n); err != nil {
		return 0, err
	}
	p, code := d.r.cMalloc(d.ord, max(n, 1))
	if code != Success {
		return 0, d.err("cudaMalloc", code, fmt.Sprintf("%d bytes", n))
	}
	return p, nil
}

// Free releases memory from Malloc.
func (d Device) Free(p uintptr) error { return d.err("cudaFree", d.r.cFree(d.ord, p), "") }

// Buffer wraps n bytes at p as a transport device buffer on this device.
func (d Device) Buffer(p uintptr, n int) transport.Buffer { return transport.DeviceBuffer(p, n, d.ord) }

// CopyHtoD copies src (any host memory, Go's included) to device address dst and
// returns when src may be reused.
func (d Device) CopyHtoD(dst uintptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.err("cudaMemcpy", d.r.cHtoD(d.ord, dst, src), fmt.Sprintf("%d bytes host to device", len(src)))
}

// CopyDtoH copies len(dst) bytes from device address src into dst and returns when
// they have arrived.
func (d Device) CopyDtoH(dst []byte, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.err("cudaMemcpy", d.r.cDtoH(d.ord, dst, src), fmt.Sprintf("%d bytes device to host", len(dst)))
}

// CopyDtoD copies n bytes between device addresses.
func (d Device) CopyDtoD(dst, src uintptr, n int) error {
	if err := checkLen("cudaMemcpy", n); err != nil || n == 0 {
		return err
	}
	return d.err("cudaMemcpy", d.r.cCopy(d.ord, dst, src, n, DeviceToDevice), fmt.Sprintf("%d bytes device to device", n))
}

// Memset sets n bytes at device address p to v.
func (d Device) Memset(p uintptr, v byte, n int) error {
	if err := checkLen("cudaMemset", n); err != nil || n == 0 {
		return err
	}
	return d.err("cudaMemset", d.r.cMemset(d.ord, p, v, n), fmt.Sprintf("%d bytes", n))
}

// Synchronize waits for all work on the device (cudaDeviceSynchronize). It cannot be
// interrupted; prefer Stream.Synchronize, which honours a context.
func (d Device) Synchronize() error {
	return d.err("cudaDeviceSynchronize", d.r.cDeviceSync(d.ord), "")
}

// Attribute reads a device attribute.
func (d Device) Attribute(a Attr) (int, error) {
	v, code := d.r.cAttr(a, d.ord)
	return v, d.err("cudaDeviceGetAttribute", code, fmt.Sprintf("attr %d", int(a)))
}

// ComputeCapability returns the major and minor compute capability (9, 0 on an H200).
func (d Device) ComputeCapability() (int, int, error) {
	maj, err := d.Attribute(AttrComputeCapMajor)
	if err != nil {
		return 0, 0, err
	}
	mnr, err := d.Attribute(AttrComputeCapMinor)
	return maj, mnr, err
}

// PCIBusID is the device's PCI address as CUDA prints it ("0000:18:00.0").
func (d Device) PCIBusID() (string, error) {
	s, code := d.r.cPCIBusID(d.ord)
	return s, d.err("cudaDeviceGetPCIBusId", code, "")
}

// MemInfo returns the free and total device memory in bytes.
func (d Device) MemInfo() (free, total uint64, err error) {
	f, t, code := d.r.cMemInfo(d.ord)
	return f, t, d.err("cudaMemGetInfo", code, "")
}

// Stream is a non-blocking CUDA stream (it does not synchronize with the legacy
// default stream).
type Stream struct {
	d Device
	h uintptr
}

// NewStream creates a stream on the device.
func (d Device) NewStream() (*Stream, error) {
	h, code := d.r.cCreate(d.ord, d.r.f.streamCreate, streamNonBlocking)
	if code != Success {
		return nil, d.err("cudaStreamCreateWithFlags", code, "")
	}
	return &Stream{d: d, h: h}, nil
}

// Handle is the cudaStream_t, for NCCL calls.
func (s *Stream) Handle() uintptr { return s.h }

// Device is the stream's device.
func (s *Stream) Device() Device { return s.d }

// CopyAsync queues a copy of n bytes. Host addresses must be pinned or other C memory
// (never Go memory: the copy runs after the call returns).
func (s *Stream) CopyAsync(dst, src uintptr, n int, kind MemcpyKind) error {
	if err := checkLen("cudaMemcpyAsync", n); err != nil || n == 0 {
		return err
	}
	return s.d.err("cudaMemcpyAsync", s.d.r.cCopyAsync(s.d.ord, dst, src, n, kind, s.h), fmt.Sprintf("%d bytes", n))
}

// Query reports whether all work queued on the stream has finished.
func (s *Stream) Query() (bool, error) {
	code := s.d.r.cHandle(s.d.ord, s.d.r.f.streamQuery, s.h)
	if code == ErrNotReady {
		return false, nil
	}
	return code == Success, s.d.err("cudaStreamQuery", code, "")
}

// Synchronize waits for the stream's work, or until ctx ends (the work keeps running).
func (s *Stream) Synchronize(ctx context.Context) error {
	if err := Poll(ctx, s.Query); err != nil {
		return fmt.Errorf("cuda: stream on device %d: %w", s.d.ord, err)
	}
	return nil
}

// WaitEvent makes later work on the stream wait for e.
func (s *Stream) WaitEvent(e *Event) error {
	return s.d.err("cudaStreamWaitEvent", s.d.r.cWaitEvent(s.d.ord, s.h, e.h), "")
}

// Destroy releases the stream; queued work still completes.
func (s *Stream) Destroy() error {
	return s.d.err("cudaStreamDestroy", s.d.r.cHandle(s.d.ord, s.d.r.f.streamDestroy, s.h), "")
}

// Event marks a point in a stream, for timing and cross-stream waits.
type Event struct {
	d Device
	h uintptr
}

// NewEvent creates an event; timing=false makes it cheaper (no timestamps).
func (d Device) NewEvent(timing bool) (*Event, error) {
	flags := uint(0)
	if !timing {
		flags = eventDisableTiming
	}
	h, code := d.r.cCreate(d.ord, d.r.f.eventCreate, flags)
	if code != Success {
		return nil, d.err("cudaEventCreateWithFlags", code, "")
	}
	return &Event{d: d, h: h}, nil
}

// Record marks the current end of stream s.
func (e *Event) Record(s *Stream) error {
	return e.d.err("cudaEventRecord", e.d.r.cHandle2(e.d.ord, e.d.r.f.eventRecord, e.h, s.h), "")
}

// Query reports whether the work before the recorded point has finished.
func (e *Event) Query() (bool, error) {
	code := e.d.r.cHandle(e.d.ord, e.d.r.f.eventQuery, e.h)
	if code == ErrNotReady {
		return false, nil
	}
	return code == Success, e.d.err("cudaEventQuery", code, "")
}

// Synchronize waits for the event, or until ctx ends.
func (e *Event) Synchronize(ctx context.Context) error {
	if err := Poll(ctx, e.Query); err != nil {
		return fmt.Errorf("cuda: event on device %d: %w", e.d.ord, err)
	}
	return nil
}

// Since returns the GPU time between start and e (both recorded and complete), with
// CUDA's resolution of about half a microsecond.
func (e *Event) Since(start *Event) (time.Duration, error) {
	ms, code := e.d.r.cElapsed(start.h, e.h)
	if code != Success {
		return 0, e.d.err("cudaEventElapsedTime", code, "")
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	return e.d.err("cudaEventDestroy", e.d.r.cHandle(e.d.ord, e.d.r.f.eventDestroy, e.h), "")
}
