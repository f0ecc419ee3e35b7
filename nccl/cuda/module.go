package cuda

import (
	"fmt"
	"math"
	"sync"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/transport"
)

// The driver API (libcuda.so.1) is loaded only for what the runtime cannot do without
// nvcc: loading a CUBIN or PTX image compiled at run time (NVRTC) and launching its
// kernels. It shares the runtime's primary context, so device pointers from
// Device.Malloc and streams from Device.NewStream work with it unchanged.

// drvFns holds the driver's entry points.
type drvFns struct {
	init, version, deviceGet, deviceCount, attr, ctxRetain, ctxSet       uintptr
	moduleLoad, moduleGetFunction, moduleUnload, launch, errName, errStr uintptr
}

// Driver is the loaded CUDA driver library. It is safe for concurrent use: every call
// that needs a context makes the device's primary context current inside the same C
// call, because the current context is per OS thread.
type Driver struct {
	lib  *dl.Lib
	f    drvFns
	path string

	mu   sync.Mutex
	ctxs map[int]uintptr // primary context per device ordinal, retained once
}

var (
	drvMu     sync.Mutex
	drvLoaded = map[string]*Driver{}
)

// DriverSpec describes where LoadDriver looks for libcuda.so.1: path when set (Params
// "cuda.driver"), else the system library path and the driver directories the NVIDIA
// container toolkit searches. The toolkit's stubs/libcuda.so is never a candidate: it
// only links, and fails every call at run time.
func DriverSpec(path string) dl.Spec {
	return dl.Spec{Name: "CUDA driver (libcuda)", Path: path, PathFrom: "cuda.driver",
		Sonames: []string{"libcuda.so.1"}, SiteDirs: []string{},
		ExtraDirs: []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/x86_64-linux-gnu/nvidia/current", "/usr/lib/wsl/lib"}}
}

// LoadDriver opens the CUDA driver and calls cuInit. A missing library is an error
// wrapping transport.ErrNotSupported that says where it looked; so is a driver that
// finds no GPU (CUDA_ERROR_NO_DEVICE). Loading the same path again returns the same
// Driver.
func LoadDriver(path string) (*Driver, error) {
	drvMu.Lock()
	defer drvMu.Unlock()
	if d, ok := drvLoaded[path]; ok {
		return d, nil
	}
	lib, f, err := loadDriverLib(DriverSpec(path))
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	d := &Driver{lib: lib, f: f, path: lib.Path(), ctxs: map[int]uintptr{}}
	if err := d.err("cuInit", -1, d.cInit(), ""); err != nil {
		return nil, err
	}
	drvLoaded[path] = d
	return d, nil
}

// Path is the file the driver was loaded from.
func (d *Driver) Path() string { return d.path }

// Version is the CUDA version the driver supports (12080 = 12.8).
func (d *Driver) Version() (int, error) {
	v, code := d.cVersion()
	return v, d.err("cuDriverGetVersion", -1, code, "")
}

// DeviceCount is the number of GPUs the driver sees.
func (d *Driver) DeviceCount() (int, error) {
	n, code := d.cDeviceCount()
	return n, d.err("cuDeviceGetCount", -1, code, "")
}

// context returns device ord's primary context, retaining it on first use. It stays
// retained for the life of the process, like the runtime's own.
func (d *Driver) context(ord int) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.ctxs[ord]; ok {
		return c, nil
	}
	c, code := d.cRetain(ord)
	if code != Success {
		return 0, d.err("cuDevicePrimaryCtxRetain", ord, code, "")
	}
	d.ctxs[ord] = c
	return c, nil
}

// Arch is the device's compute capability as NVRTC's architecture number (90 for
// compute capability 9.0, an H200), read from the driver.
func (d *Driver) Arch(ord int) (int, error) {
	maj, code := d.cAttr(int(AttrComputeCapMajor), ord)
	if code != Success {
		return 0, d.err("cuDeviceGetAttribute", ord, code, "compute capability major")
	}
	mnr, code := d.cAttr(int(AttrComputeCapMinor), ord)
	if code != Success {
		return 0, d.err("cuDeviceGetAttribute", ord, code, "compute capability minor")
	}
	return maj*10 + mnr, nil
}

// Attribute reads a device attribute through the driver (the same numbers as Attr).
func (d *Driver) Attribute(a Attr, ord int) (int, error) {
	v, code := d.cAttr(int(a), ord)
	return v, d.err("cuDeviceGetAttribute", ord, code, fmt.Sprintf("attr %d", int(a)))
}

// Module is a loaded CUBIN or PTX image on one device.
type Module struct {
	d    *Driver
	dev  Device
	ctx  uintptr
	h    uintptr
	keep imageCopy // the image in C memory, held until Unload
	once sync.Once
}

// LoadModule loads image (a CUBIN, or NUL-terminated PTX text) into dev's primary
// context. The JIT's error log, when the driver rejects the image, is in the error.
func (d *Driver) LoadModule(dev Device, image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: %w: load an empty module image", transport.ErrInvalid)
	}
	ctx, err := d.context(dev.ord)
	if err != nil {
		return nil, err
	}
	keep := newImageCopy(image)
	h, code, log := d.cModuleLoad(ctx, keep)
	if code != Success {
		keep.free()
		detail := fmt.Sprintf("%d-byte image", len(image))
		if log != "" {
			detail += "; JIT log: " + log
		}
		return nil, d.err("cuModuleLoadDataEx", dev.ord, code, detail)
	}
	return &Module{d: d, dev: dev, ctx: ctx, h: h, keep: keep}, nil
}

// Function looks up an extern "C" kernel by name.
func (m *Module) Function(name string) (*Function, error) {
	fn, code := m.d.cGetFunction(m.ctx, m.h, name)
	if code != Success {
		return nil, m.d.err("cuModuleGetFunction", m.dev.ord, code, fmt.Sprintf("%q (declare it extern \"C\")", name))
	}
	return &Function{m: m, h: fn, name: name}, nil
}

// Unload releases the module; its Functions must not be launched afterwards.
func (m *Module) Unload() error {
	var err error
	m.once.Do(func() {
		err = m.d.err("cuModuleUnload", m.dev.ord, m.d.cModuleUnload(m.ctx, m.h), "")
		m.keep.free()
	})
	return err
}

// Function is one kernel of a Module.
type Function struct {
	m    *Module
	h    uintptr
	name string
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }

// Dim is a one-dimensional Dim3.
func Dim(x int) Dim3 { return Dim3{X: uint32(x), Y: 1, Z: 1} }

// Arg is one kernel argument, by value: a device pointer or a scalar. Build them with
// PtrArg, I32Arg, I64Arg, F32Arg and F64Arg, in the kernel's parameter order.
type Arg struct{ bits uint64 }

// PtrArg passes a device pointer.
func PtrArg(p uintptr) Arg { return Arg{uint64(p)} }

// I32Arg passes an int (or unsigned int) parameter.
func I32Arg(v int32) Arg { return Arg{uint64(uint32(v))} }

// I64Arg passes a long long parameter.
func I64Arg(v int64) Arg { return Arg{uint64(v)} }

// F32Arg passes a float parameter.
func F32Arg(v float32) Arg { return Arg{uint64(math.Float32bits(v))} }

// F64Arg passes a double parameter.
func F64Arg(v float64) Arg { return Arg{math.Float64bits(v)} }

// maxArgs bounds the C-side argument slots.
const maxArgs = 32

// Launch queues the kernel on stream s with the given grid and block sizes and dynamic
// shared memory. Each argument occupies an 8-byte slot in C memory; the driver reads
// as many bytes of it as the parameter's type has (little-endian, so 4-byte values sit
// at the start). The stream must belong to the module's device.
func (f *Function) Launch(s *Stream, grid, block Dim3, shared int, args ...Arg) error {
	if len(args) > maxArgs {
		return fmt.Errorf("cuda: %w: kernel %s with %d arguments (at most %d)", transport.ErrInvalid, f.name, len(args), maxArgs)
	}
	if s == nil || s.d.ord != f.m.dev.ord {
		return fmt.Errorf("cuda: %w: kernel %s of device %d launched on a stream of another device", transport.ErrInvalid, f.name, f.m.dev.ord)
	}
	if grid.X == 0 || block.X == 0 || shared < 0 {
		return fmt.Errorf("cuda: %w: kernel %s with grid %v, block %v, %d shared bytes (want non-zero sizes)", transport.ErrInvalid, f.name, grid, block, shared)
	}
	vals := make([]uint64, len(args))
	for i, a := range args {
		vals[i] = a.bits
	}
	code := f.m.d.cLaunch(f.m.ctx, f.h, grid, block, shared, s.h, vals)
	return f.m.d.err("cuLaunchKernel", f.m.dev.ord, code, fmt.Sprintf("%s grid %d block %d", f.name, grid.X, block.X))
}

// DriverError is a failed driver API call.
type DriverError struct {
	Call   string
	Device int // -1 when the call has none
	Code   int // the CUresult
	Name   string
	Text   string
	Detail string
}

func (e *DriverError) Error() string {
	s := "cuda: " + e.Call
	if e.Detail != "" {
		s += "(" + e.Detail + ")"
	}
	if e.Device >= 0 {
		s += fmt.Sprintf(" on device %d", e.Device)
	}
	name := e.Name
	if name == "" {
		name = fmt.Sprintf("CUresult(%d)", e.Code)
	}
	s += fmt.Sprintf(": %s (%d)", name, e.Code)
	if e.Text != "" {
		s += ": " + e.Text
	}
	return s
}

// Unwrap maps the CUresult onto goccl's sentinels: no device, a stub library, a driver
// too old for the image or no image for this GPU are ErrNotSupported; bad arguments,
// handles and names are ErrInvalid.
func (e *DriverError) Unwrap() error {
	switch e.Code {
	case ErrNoDevice, ErrStubLibrary, ErrInitialization, ErrDevicesUnavailable, ErrNotSupportedCode,
		ErrSystemDriverMismatch, ErrCompatNotSupported, drvNoBinaryForGPU, drvUnsupportedPTX, drvJITNotFound:
		return transport.ErrNotSupported
	case ErrInvalidValue, ErrInvalidDevice, drvInvalidImage, drvInvalidContext, drvInvalidPTX, ErrInvalidResourceHandle, drvNotFound:
		return transport.ErrInvalid
	case ErrCudartUnloading, ErrContextIsDestroyed:
		return transport.ErrClosed
	}
	return nil
}

// CUresult values the driver API adds to the runtime's (reference/abi.md section 5.1).
const (
	drvInvalidImage    = 200
	drvInvalidContext  = 201
	drvNoBinaryForGPU  = 209
	drvInvalidPTX      = 218
	drvJITNotFound     = 221
	drvUnsupportedPTX  = 222
	drvNotFound        = 500
	drvContextFailed   = 0x40000000 // set in a trampoline's result when cuCtxSetCurrent failed
	drvJITLogBytes     = 4096
	drvJITErrorLog     = 5 // CU_JIT_ERROR_LOG_BUFFER
	drvJITErrorLogSize = 6 // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
)

func (d *Driver) err(call string, dev, code int, detail string) error {
	if code == Success {
		return nil
	}
	if code&drvContextFailed != 0 {
		code &^= drvContextFailed
		call = "cuCtxSetCurrent for " + call
	}
	name, text := d.cErrStrings(code)
	return &DriverError{Call: call, Device: dev, Code: code, Name: name, Text: text, Detail: detail}
}
