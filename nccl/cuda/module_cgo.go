//go:build linux && cgo

package cuda

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CTX_FAILED 0x40000000
typedef int (*setctx_t)(void*);
// SC makes ctx current on this OS thread in the same C call as the work that needs it.
#define SC(sc, ctx) do { int _r = ((setctx_t)(sc))((void*)(ctx)); if (_r) return _r | CTX_FAILED; } while (0)

static int d_init(uintptr_t f) { return ((int(*)(unsigned))f)(0); }
static int d_int(uintptr_t f, int* out) { return ((int(*)(int*))f)(out); }
static int d_attr(uintptr_t get, uintptr_t f, int* v, int attr, int ord) {
	int dev = 0; int r = ((int(*)(int*, int))get)(&dev, ord); if (r) return r;
	return ((int(*)(int*, int, int))f)(v, attr, dev);
}
static int d_retain(uintptr_t get, uintptr_t f, uintptr_t* out, int ord) {
	int dev = 0; int r = ((int(*)(int*, int))get)(&dev, ord); if (r) return r;
	void* c = 0; r = ((int(*)(void**, int))f)(&c, dev); *out = (uintptr_t)c; return r;
}
static int d_load(uintptr_t sc, uintptr_t ctx, uintptr_t f, uintptr_t* out, const void* image, char* log, size_t logn) {
	SC(sc, ctx);
	int opts[2] = {5, 6}; // CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
	void* vals[2] = {log, (void*)(uintptr_t)logn};
	void* m = 0;
	int r = ((int(*)(void**, const void*, unsigned, int*, void**))f)(&m, image, 2, opts, vals);
	*out = (uintptr_t)m; return r;
}
static int d_getfn(uintptr_t sc, uintptr_t ctx, uintptr_t f, uintptr_t* out, uintptr_t mod, const char* name) {
	SC(sc, ctx); void* fn = 0;
	int r = ((int(*)(void**, void*, const char*))f)(&fn, (void*)mod, name); *out = (uintptr_t)fn; return r;
}
static int d_unload(uintptr_t sc, uintptr_t ctx, uintptr_t f, uintptr_t mod) { SC(sc, ctx); return ((int(*)(void*))f)((void*)mod); }
typedef int (*launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
// d_launch copies the argument values into C slots on this stack frame; cuLaunchKernel
// copies them again before it returns, so nothing outlives the call.
static int d_launch(uintptr_t sc, uintptr_t ctx, uintptr_t f, uintptr_t fn, unsigned gx, unsigned gy, unsigned gz,
		unsigned bx, unsigned by, unsigned bz, unsigned shm, uintptr_t stream, const uint64_t* vals, int n) {
	SC(sc, ctx);
	uint64_t slots[32]; void* params[32];
	for (int i = 0; i < n; i++) { slots[i] = vals[i]; params[i] = &slots[i]; }
	return ((launch_t)f)((void*)fn, gx, gy, gz, bx, by, bz, shm, (void*)stream, n ? params : 0, 0);
}
static const char* d_str(uintptr_t f, int code) {
	const char* s = 0; if (((int(*)(int, const char**))f)(code, &s)) return 0; return s;
}
*/
import "C"

import (
	"unsafe"

	"github.com/goccl/goccl/internal/dl"
)

func loadDriverLib(s dl.Spec) (*dl.Lib, drvFns, error) {
	var f drvFns
	lib, err := dl.Open(s)
	if err != nil {
		return nil, f, err
	}
	req := map[string]*uintptr{
		"cuInit": &f.init, "cuDriverGetVersion": &f.version, "cuDeviceGet": &f.deviceGet, "cuDeviceGetCount": &f.deviceCount,
		"cuDeviceGetAttribute": &f.attr, "cuDevicePrimaryCtxRetain": &f.ctxRetain, "cuCtxSetCurrent": &f.ctxSet,
		"cuModuleLoadDataEx": &f.moduleLoad, "cuModuleGetFunction": &f.moduleGetFunction, "cuModuleUnload": &f.moduleUnload,
		"cuLaunchKernel": &f.launch, "cuGetErrorName": &f.errName, "cuGetErrorString": &f.errStr,
	}
	if err := lib.Syms(req, nil); err != nil {
		return nil, f, err
	}
	return lib, f, nil
}

func (d *Driver) cInit() int { return int(C.d_init(C.uintptr_t(d.f.init))) }

func (d *Driver) cVersion() (int, int) {
	var v C.int
	code := C.d_int(C.uintptr_t(d.f.version), &v)
	return int(v), int(code)
}

func (d *Driver) cDeviceCount() (int, int) {
	var v C.int
	code := C.d_int(C.uintptr_t(d.f.deviceCount), &v)
	return int(v), int(code)
}

func (d *Driver) cAttr(attr, ord int) (int, int) {
	var v C.int
	code := C.d_attr(C.uintptr_t(d.f.deviceGet), C.uintptr_t(d.f.attr), &v, C.int(attr), C.int(ord))
	return int(v), int(code)
}

func (d *Driver) cRetain(ord int) (uintptr, int) {
	var c C.uintptr_t
	code := C.d_retain(C.uintptr_t(d.f.deviceGet), C.uintptr_t(d.f.ctxRetain), &c, C.int(ord))
	return uintptr(c), int(code)
}

func (d *Driver) sc() C.uintptr_t { return C.uintptr_t(d.f.ctxSet) }

func (d *Driver) cModuleLoad(ctx uintptr, img imageCopy) (uintptr, int, string) {
	var m C.uintptr_t
	log := (*C.char)(C.calloc(drvJITLogBytes, 1))
	defer C.free(unsafe.Pointer(log))
	code := C.d_load(d.sc(), C.uintptr_t(ctx), C.uintptr_t(d.f.moduleLoad), &m, img.p, log, drvJITLogBytes)
	return uintptr(m), int(code), C.GoString(log)
}

func (d *Driver) cGetFunction(ctx, mod uintptr, name string) (uintptr, int) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var fn C.uintptr_t
	code := C.d_getfn(d.sc(), C.uintptr_t(ctx), C.uintptr_t(d.f.moduleGetFunction), &fn, C.uintptr_t(mod), cs)
	return uintptr(fn), int(code)
}

func (d *Driver) cModuleUnload(ctx, mod uintptr) int {
	return int(C.d_unload(d.sc(), C.uintptr_t(ctx), C.uintptr_t(d.f.moduleUnload), C.uintptr_t(mod)))
}

func (d *Driver) cLaunch(ctx, fn uintptr, g, b Dim3, shared int, stream uintptr, vals []uint64) int {
	var p *C.uint64_t
	if len(vals) > 0 {
		p = (*C.uint64_t)(unsafe.Pointer(&vals[0]))
	}
	return int(C.d_launch(d.sc(), C.uintptr_t(ctx), C.uintptr_t(d.f.launch), C.uintptr_t(fn),
		C.unsigned(g.X), C.unsigned(g.Y), C.unsigned(g.Z), C.unsigned(b.X), C.unsigned(b.Y), C.unsigned(b.Z),
		C.unsigned(shared), C.uintptr_t(stream), p, C.int(len(vals))))
}

func (d *Driver) cErrStrings(code int) (string, string) {
	var name, text string
	if p := C.d_str(C.uintptr_t(d.f.errName), C.int(code)); p != nil {
		name = C.GoString(p)
	}
	if p := C.d_str(C.uintptr_t(d.f.errStr), C.int(code)); p != nil {
		text = C.GoString(p)
	}
	return name, text
}

// imageCopy is a module image in C memory: the driver may read it after the Go slice
// it came from has moved or been collected.
type imageCopy struct{ p unsafe.Pointer }

func newImageCopy(b []byte) imageCopy {
	p := C.malloc(C.size_t(len(b) + 1))
	dst := unsafe.Slice((*byte)(p), len(b)+1)
	copy(dst, b)
	dst[len(b)] = 0 // PTX is read as a C string
	return imageCopy{p: p}
}

func (c imageCopy) free() {
	if c.p != nil {
		C.free(c.p)
	}
}
