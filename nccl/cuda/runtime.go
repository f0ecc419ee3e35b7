package cuda

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/transport"
)

// fns holds the runtime's entry points, resolved once by dlsym.
type fns struct {
	getDeviceCount, setDevice, getDevice, driverVersion, runtimeVersion uintptr
	malloc, free, hostAlloc, freeHost, memcpy, memcpyAsync, memset      uintptr
	streamCreate, streamQuery, streamSync, streamDestroy, streamWait    uintptr
	eventCreate, eventRecord, eventQuery, eventSync, eventDestroy       uintptr
	eventElapsed, deviceSync, ptrAttr, devAttr, pciBusID, memInfo       uintptr
	errName, errString, getLastError                                    uintptr
}

// Runtime is a loaded CUDA runtime library (libcudart). It is safe for concurrent use;
// every device-scoped call selects its device inside the same C call.
type Runtime struct {
	lib  *dl.Lib
	f    fns
	path string
	from string
}

var (
	loadMu sync.Mutex
	loaded = map[string]*Runtime{} // by requested path ("" = default search)
	first  *Runtime
)

// LibrarySpec describes where Load looks for libcudart: path (a file or a directory,
// from config) when set, else the system library path, the pip wheels' nvidia/cu13/lib
// and nvidia/cuda_runtime/lib, and /usr/local/cuda.
func LibrarySpec(path string) dl.Spec {
	s := dl.Spec{Name: "CUDA runtime (libcudart)", Path: path, PathFrom: "cuda.lib",
		Sonames: sonames, WheelDirs: wheelDirs, ExtraDirs: extraDirs}
	if cp := os.Getenv("CONDA_PREFIX"); cp != "" {
		s.ExtraDirs = append([]string{cp + "/lib"}, s.ExtraDirs...)
	}
	return s
}

// Load opens the CUDA runtime (see LibrarySpec for the search) and resolves its entry
// points. Loading the same path again returns the same Runtime. A missing library or
// symbol is an error wrapping transport.ErrNotSupported that says what was searched.
// Load does not need a GPU; DeviceCount reports whether one is usable.
func Load(path string) (*Runtime, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if r, ok := loaded[path]; ok {
		return r, nil
	}
	lib, f, err := loadLib(LibrarySpec(path))
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	r := &Runtime{lib: lib, f: f, path: lib.Path(), from: lib.From()}
	loaded[path] = r
	if first == nil {
		first = r
	}
	return r, nil
}

// Loaded returns the first runtime Load succeeded with in this process, or nil. Code
// without access to config (device staging) uses it to stay on the library the user chose.
func Loaded() *Runtime {
	loadMu.Lock()
	defer loadMu.Unlock()
	return first
}

// Path is the file the runtime was loaded from; From says which search step found it.
func (r *Runtime) Path() string { return r.path }

// From says which search step found the library ("pip wheel in /usr/lib/python3/dist-packages").
func (r *Runtime) From() string { return r.from }

// SetDeviceFunc is the address of cudaSetDevice, for other packages' C trampolines that
// must select the device in the same C call as their own work (NCCL comm init).
func (r *Runtime) SetDeviceFunc() uintptr { return r.f.setDevice }

func (r *Runtime) err(call string, dev, code int, detail string) error {
	if code == Success {
		return nil
	}
	if code&setDevFailed != 0 {
		code &^= setDevFailed
		call = "cudaSetDevice for " + call
	}
	name, text := r.cErrStrings(code)
	r.cClearLast()
	return &Error{Call: call, Device: dev, Code: code, Name: name, Text: text, Detail: detail}
}

// DriverVersion is the CUDA version the installed driver supports (12080 = 12.8), 0
// when there is no driver.
func (r *Runtime) DriverVersion() (int, error) {
	v, code := r.cInt(r.f.driverVersion)
	return v, r.err("cudaDriverGetVersion", -1, code, "")
}

// RuntimeVersion is the loaded libcudart's version (12060 = 12.6).
func (r *Runtime) RuntimeVersion() (int, error) {
	v, code := r.cInt(r.f.runtimeVersion)
	return v, r.err("cudaRuntimeGetVersion", -1, code, "")
}

// DeviceCount is the number of usable GPUs. With no driver or no GPU it returns an
// error wrapping transport.ErrNotSupported.
func (r *Runtime) DeviceCount() (int, error) {
	n, code := r.cInt(r.f.getDeviceCount)
	if code != Success {
		return 0, r.err("cudaGetDeviceCount", -1, code, "")
	}
	return n, nil
}

// Device returns device ord after checking it exists.
func (r *Runtime) Device(ord int) (Device, error) {
	n, err := r.DeviceCount()
	if err != nil {
		return Device{}, err
	}
	if ord < 0 || ord >= n {
		return Device{}, fmt.Errorf("cuda: %w: device %d does not exist (this host has %d: 0..%d)",
			transport.ErrInvalid, ord, n, n-1)
	}
	return Device{r: r, ord: ord}, nil
}

// PointerInfo says what kind of memory ptr points to and on which device. An ordinary
// host pointer is Unregistered (CUDA >= 11 reports success for it).
func (r *Runtime) PointerInfo(ptr uintptr) (MemoryType, int, error) {
	t, dev, code := r.cPtrAttr(ptr)
	if code != Success {
		return 0, 0, r.err("cudaPointerGetAttributes", -1, code, fmt.Sprintf("%#x", ptr))
	}
	return t, dev, nil
}

// IsDevicePointer reports whether ptr is device (or managed) memory.
func (r *Runtime) IsDevicePointer(ptr uintptr) bool {
	t, _, err := r.PointerInfo(ptr)
	return err == nil && (t == DeviceMemory || t == Managed)
}

// Pinned is page-locked host memory from cudaHostAlloc (portable: pinned for every
// device). It is C memory, so async copies and NCCL may use it after a call returns.
type Pinned struct {
	r    *Runtime
	p    unsafe.Pointer
	n    int
	once sync.Once
}

// MallocHost allocates n bytes of pinned host memory.
func (r *Runtime) MallocHost(n int) (*Pinned, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: %w: pinned allocation of %d bytes", transport.ErrInvalid, n)
	}
	p, code := r.cHostAlloc(-1, max(n, 1))
	if code != Success {
		return nil, r.err("cudaHostAlloc", -1, code, fmt.Sprintf("%d bytes", n))
	}
	return &Pinned{r: r, p: p, n: n}, nil
}

// Bytes views the pinned memory; it is valid until Free.
func (p *Pinned) Bytes() []byte { return pinnedSlice(p.p, p.n) }

// Ptr is the address of the memory, for async copies and NCCL calls.
func (p *Pinned) Ptr() uintptr { return uintptr(p.p) }

// Len is the size in bytes.
func (p *Pinned) Len() int { return p.n }

// Free releases the memory; later calls do nothing.
func (p *Pinned) Free() error {
	var err error
	p.once.Do(func() { err = p.r.err("cudaFreeHost", -1, p.r.cFreeHost(p.p), "") })
	return err
}

// PollSpin is how long Poll spins (yielding to other goroutines) before it sleeps.
//
// It was 50 µs. On the H200 machine, NCCL's 512 MiB out-of-place AllReduce at one rank
// took 1216 µs through goccl where the same copy took 256 µs in PyTorch: a wait that
// outlasts the spin sleeps, and short timer sleeps overshoot in these VMs (Go's timers
// here: a done() that turns true 256 µs after the start is seen 1.2 ms late, one at 66
// µs 0.6 ms late; `go test -run '^$' -bench PollLate ./nccl/cuda`). Spinning for 2 ms
// covers the GPU work of a collective call up to hundreds of megabytes; the host thread
// that waits for it has nothing else to do, which is also why cudaStreamSynchronize
// spins by default. Longer waits then sleep, and their overshoot is a smaller share.
var PollSpin = 2 * time.Millisecond

// Poll calls done until it reports true or an error, or ctx ends. It spins (yielding)
// for PollSpin, because a sleeping wake-up costs tens to hundreds of microseconds in
// VMs, then sleeps with an interval growing to 200 µs so a long wait does not burn a
// core.
func Poll(ctx context.Context, done func() (bool, error)) error {
	start := time.Now()
	sleep := 5 * time.Microsecond
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if err := ctx.Err(); err != nil {
			return ctxErr(ctx)
		}
		if time.Since(start) < PollSpin {
			runtime.Gosched()
			continue
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctxErr(ctx)
		case <-t.C:
		}
		sleep = min(2*sleep, 200*time.Microsecond)
	}
}

func ctxErr(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	return fmt.Errorf("%w: %w", transport.ErrClosed, ctx.Err())
}
