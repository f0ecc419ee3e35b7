//go:build linux && cgo

package cuda

/*
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#define SETDEV_FAILED 0x40000000
typedef int (*setdev_t)(int);
// Every device-scoped call sets the device first, in the same C call, because CUDA's
// current device is per OS thread and a goroutine may move between threads.
#define SD(sd, dev) do { if ((dev) >= 0) { int _r = ((setdev_t)(sd))(dev); if (_r) return _r | SETDEV_FAILED; } } while (0)

static int t_int(uintptr_t f, int* out) { return ((int(*)(int*))f)(out); }
static int t_setdev(uintptr_t f, int dev) { return ((int(*)(int))f)(dev); }
static int t_malloc(uintptr_t sd, int dev, uintptr_t f, uintptr_t* out, size_t n) {
	SD(sd, dev); void* p = 0; int r = ((int(*)(void**, size_t))f)(&p, n); *out = (uintptr_t)p; return r;
}
static int t_free(uintptr_t sd, int dev, uintptr_t f, uintptr_t p) { SD(sd, dev); return ((int(*)(void*))f)((void*)p); }
static int t_hostalloc(uintptr_t sd, int dev, uintptr_t f, void** out, size_t n, unsigned flags) {
	SD(sd, dev); return ((int(*)(void**, size_t, unsigned))f)(out, n, flags);
}
static int t_freehost(uintptr_t f, void* p) { return ((int(*)(void*))f)(p); }
typedef int (*memcpy_t)(void*, const void*, size_t, int);
static int t_htod(uintptr_t sd, int dev, uintptr_t f, uintptr_t dst, const void* src, size_t n) {
	SD(sd, dev); return ((memcpy_t)f)((void*)dst, src, n, 1);
}
static int t_dtoh(uintptr_t sd, int dev, uintptr_t f, void* dst, uintptr_t src, size_t n) {
	SD(sd, dev); return ((memcpy_t)f)(dst, (const void*)src, n, 2);
}
static int t_copy(uintptr_t sd, int dev, uintptr_t f, uintptr_t dst, uintptr_t src, size_t n, int kind) {
	SD(sd, dev); return ((memcpy_t)f)((void*)dst, (const void*)src, n, kind);
}
static int t_copyasync(uintptr_t sd, int dev, uintptr_t f, uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s) {
	SD(sd, dev); return ((int(*)(void*, const void*, size_t, int, void*))f)((void*)dst, (const void*)src, n, kind, (void*)s);
}
static int t_memset(uintptr_t sd, int dev, uintptr_t f, uintptr_t p, int v, size_t n) {
	SD(sd, dev); return ((int(*)(void*, int, size_t))f)((void*)p, v, n);
}
static int t_create(uintptr_t sd, int dev, uintptr_t f, uintptr_t* out, unsigned flags) {
	SD(sd, dev); void* h = 0; int r = ((int(*)(void**, unsigned))f)(&h, flags); *out = (uintptr_t)h; return r;
}
static int t_handle(uintptr_t sd, int dev, uintptr_t f, uintptr_t h) { SD(sd, dev); return ((int(*)(void*))f)((void*)h); }
static int t_handle2(uintptr_t sd, int dev, uintptr_t f, uintptr_t a, uintptr_t b) {
	SD(sd, dev); return ((int(*)(void*, void*))f)((void*)a, (void*)b);
}
static int t_waitevent(uintptr_t sd, int dev, uintptr_t f, uintptr_t s, uintptr_t e) {
	SD(sd, dev); return ((int(*)(void*, void*, unsigned))f)((void*)s, (void*)e, 0);
}
static int t_void(uintptr_t sd, int dev, uintptr_t f) { SD(sd, dev); return ((int(*)(void))f)(); }
static int t_elapsed(uintptr_t f, float* ms, uintptr_t a, uintptr_t b) { return ((int(*)(float*, void*, void*))f)(ms, (void*)a, (void*)b); }
struct ptrattr { int type; int device; void* dptr; void* hptr; };
static int t_ptrattr(uintptr_t f, uintptr_t p, int* type, int* device) {
	struct ptrattr a; memset(&a, 0, sizeof a);
	int r = ((int(*)(struct ptrattr*, const void*))f)(&a, (const void*)p);
	*type = a.type; *device = a.device; return r;
}
static int t_attr(uintptr_t f, int* v, int attr, int dev) { return ((int(*)(int*, int, int))f)(v, attr, dev); }
static int t_pci(uintptr_t f, char* buf, int n, int dev) { return ((int(*)(char*, int, int))f)(buf, n, dev); }
static int t_meminfo(uintptr_t sd, int dev, uintptr_t f, size_t* fr, size_t* tot) {
	SD(sd, dev); return ((int(*)(size_t*, size_t*))f)(fr, tot);
}
static const char* t_str(uintptr_t f, int code) { return ((const char*(*)(int))f)(code); }
static int t_getlast(uintptr_t f) { return ((int(*)(void))f)(); }
*/
import "C"

import (
	"unsafe"

	"github.com/goccl/goccl/internal/dl"
)

func loadLib(s dl.Spec) (*dl.Lib, fns, error) {
	var f fns
	lib, err := dl.Open(s)
	if err != nil {
		return nil, f, err
	}
	req := map[string]*uintptr{
		"cudaGetDeviceCount": &f.getDeviceCount, "cudaSetDevice": &f.setDevice, "cudaGetDevice": &f.getDevice,
		"cudaDriverGetVersion": &f.driverVersion, "cudaRuntimeGetVersion": &f.runtimeVersion,
		"cudaMalloc": &f.malloc, "cudaFree": &f.free, "cudaHostAlloc": &f.hostAlloc, "cudaFreeHost": &f.freeHost,
		"cudaMemcpy": &f.memcpy, "cudaMemcpyAsync": &f.memcpyAsync, "cudaMemset": &f.memset,
		"cudaStreamCreateWithFlags": &f.streamCreate, "cudaStreamQuery": &f.streamQuery,
		"cudaStreamSynchronize": &f.streamSync, "cudaStreamDestroy": &f.streamDestroy, "cudaStreamWaitEvent": &f.streamWait,
		"cudaEventCreateWithFlags": &f.eventCreate, "cudaEventRecord": &f.eventRecord, "cudaEventQuery": &f.eventQuery,
		"cudaEventSynchronize": &f.eventSync, "cudaEventDestroy": &f.eventDestroy, "cudaEventElapsedTime": &f.eventElapsed,
		"cudaDeviceSynchronize": &f.deviceSync, "cudaPointerGetAttributes": &f.ptrAttr,
		"cudaDeviceGetAttribute": &f.devAttr, "cudaDeviceGetPCIBusId": &f.pciBusID, "cudaMemGetInfo": &f.memInfo,
		"cudaGetErrorName": &f.errName, "cudaGetErrorString": &f.errString, "cudaGetLastError": &f.getLastError,
	}
	if err := lib.Syms(req, nil); err != nil {
		return nil, f, err
	}
	return lib, f, nil
}

func (r *Runtime) cInt(fn uintptr) (int, int) {
	var v C.int
	code := C.t_int(C.uintptr_t(fn), &v)
	return int(v), int(code)
}

func (r *Runtime) cSetDevice(dev int) int {
	return int(C.t_setdev(C.uintptr_t(r.f.setDevice), C.int(dev)))
}

func (r *Runtime) sd() C.uintptr_t { return C.uintptr_t(r.f.setDevice) }

func (r *Runtime) cMalloc(dev, n int) (uintptr, int) {
	var p C.uintptr_t
	code := C.t_malloc(r.sd(), C.int(dev), C.uintptr_t(r.f.malloc), &p, C.size_t(n))
	return uintptr(p), int(code)
}

func (r *Runtime) cFree(dev int, p uintptr) int {
	return int(C.t_free(r.sd(), C.int(dev), C.uintptr_t(r.f.free), C.uintptr_t(p)))
}

func (r *Runtime) cHostAlloc(dev, n int) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	code := C.t_hostalloc(r.sd(), C.int(dev), C.uintptr_t(r.f.hostAlloc), &p, C.size_t(n), hostAllocPortable)
	return p, int(code)
}

func (r *Runtime) cFreeHost(p unsafe.Pointer) int {
	return int(C.t_freehost(C.uintptr_t(r.f.freeHost), p))
}

func (r *Runtime) cHtoD(dev int, dst uintptr, src []byte) int {
	return int(C.t_htod(r.sd(), C.int(dev), C.uintptr_t(r.f.memcpy), C.uintptr_t(dst), unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src))))
}

func (r *Runtime) cDtoH(dev int, dst []byte, src uintptr) int {
	return int(C.t_dtoh(r.sd(), C.int(dev), C.uintptr_t(r.f.memcpy), unsafe.Pointer(unsafe.SliceData(dst)), C.uintptr_t(src), C.size_t(len(dst))))
}

func (r *Runtime) cCopy(dev int, dst, src uintptr, n int, kind MemcpyKind) int {
	return int(C.t_copy(r.sd(), C.int(dev), C.uintptr_t(r.f.memcpy), C.uintptr_t(dst), C.uintptr_t(src), C.size_t(n), C.int(kind)))
}

func (r *Runtime) cCopyAsync(dev int, dst, src uintptr, n int, kind MemcpyKind, s uintptr) int {
	return int(C.t_copyasync(r.sd(), C.int(dev), C.uintptr_t(r.f.memcpyAsync), C.uintptr_t(dst), C.uintptr_t(src), C.size_t(n), C.int(kind), C.uintptr_t(s)))
}

func (r *Runtime) cMemset(dev int, p uintptr, v byte, n int) int {
	return int(C.t_memset(r.sd(), C.int(dev), C.uintptr_t(r.f.memset), C.uintptr_t(p), C.int(v), C.size_t(n)))
}

func (r *Runtime) cCreate(dev int, fn uintptr, flags uint) (uintptr, int) {
	var h C.uintptr_t
	code := C.t_create(r.sd(), C.int(dev), C.uintptr_t(fn), &h, C.unsigned(flags))
	return uintptr(h), int(code)
}

func (r *Runtime) cHandle(dev int, fn, h uintptr) int {
	return int(C.t_handle(r.sd(), C.int(dev), C.uintptr_t(fn), C.uintptr_t(h)))
}

func (r *Runtime) cHandle2(dev int, fn, a, b uintptr) int {
	return int(C.t_handle2(r.sd(), C.int(dev), C.uintptr_t(fn), C.uintptr_t(a), C.uintptr_t(b)))
}

func (r *Runtime) cWaitEvent(dev int, s, e uintptr) int {
	return int(C.t_waitevent(r.sd(), C.int(dev), C.uintptr_t(r.f.streamWait), C.uintptr_t(s), C.uintptr_t(e)))
}

func (r *Runtime) cDeviceSync(dev int) int {
	return int(C.t_void(r.sd(), C.int(dev), C.uintptr_t(r.f.deviceSync)))
}

func (r *Runtime) cElapsed(a, b uintptr) (float32, int) {
	var ms C.float
	code := C.t_elapsed(C.uintptr_t(r.f.eventElapsed), &ms, C.uintptr_t(a), C.uintptr_t(b))
	return float32(ms), int(code)
}

func (r *Runtime) cPtrAttr(p uintptr) (MemoryType, int, int) {
	var typ, dev C.int
	code := C.t_ptrattr(C.uintptr_t(r.f.ptrAttr), C.uintptr_t(p), &typ, &dev)
	return MemoryType(typ), int(dev), int(code)
}

func (r *Runtime) cAttr(a Attr, dev int) (int, int) {
	var v C.int
	code := C.t_attr(C.uintptr_t(r.f.devAttr), &v, C.int(a), C.int(dev))
	return int(v), int(code)
}

func (r *Runtime) cPCIBusID(dev int) (string, int) {
	var buf [64]C.char
	code := C.t_pci(C.uintptr_t(r.f.pciBusID), &buf[0], C.int(len(buf)), C.int(dev))
	return C.GoString(&buf[0]), int(code)
}

func (r *Runtime) cMemInfo(dev int) (uint64, uint64, int) {
	var fr, tot C.size_t
	code := C.t_meminfo(r.sd(), C.int(dev), C.uintptr_t(r.f.memInfo), &fr, &tot)
	return uint64(fr), uint64(tot), int(code)
}

func (r *Runtime) cErrStrings(code int) (string, string) {
	var name, text string
	if p := C.t_str(C.uintptr_t(r.f.errName), C.int(code)); p != nil {
		name = C.GoString(p)
	}
	if p := C.t_str(C.uintptr_t(r.f.errString), C.int(code)); p != nil {
		text = C.GoString(p)
	}
	return name, text
}

// cClearLast resets the runtime's non-sticky last error after a failed call, so the
// failure is not reported again by an unrelated later call.
func (r *Runtime) cClearLast() { C.t_getlast(C.uintptr_t(r.f.getLastError)) }

// pinnedSlice views C memory of n bytes as a Go slice.
func pinnedSlice(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }
