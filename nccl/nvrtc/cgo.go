//go:build linux && cgo

package nvrtc

/*
#include <stdint.h>
#include <stdlib.h>

static int n_version(uintptr_t f, int* a, int* b) { return ((int(*)(int*, int*))f)(a, b); }
static const char* n_str(uintptr_t f, int code) { return ((const char*(*)(int))f)(code); }
static int n_size(uintptr_t f, uintptr_t prog, size_t* n) { return ((int(*)(void*, size_t*))f)((void*)prog, n); }
static int n_get(uintptr_t f, uintptr_t prog, char* out) { return ((int(*)(void*, char*))f)((void*)prog, out); }
static int n_destroy(uintptr_t f, uintptr_t prog) { void* p = (void*)prog; return ((int(*)(void**))f)(&p); }
static int n_int(uintptr_t f, int* n) { return ((int(*)(int*))f)(n); }
static int n_archs(uintptr_t f, int* out) { return ((int(*)(int*))f)(out); }
// n_create_compile creates the program and compiles it with the options in one C call;
// the program handle comes back for the log and the output even when compiling fails.
static int n_create_compile(uintptr_t create, uintptr_t compile, uintptr_t* prog, const char* src, const char* name,
		int nopt, char** opts, int* created) {
	void* p = 0;
	int r = ((int(*)(void**, const char*, const char*, int, const char* const*, const char* const*))create)(&p, src, name, 0, 0, 0);
	*prog = (uintptr_t)p;
	*created = r == 0;
	if (r) return r;
	return ((int(*)(void*, int, const char* const*))compile)(p, nopt, (const char* const*)opts);
}
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
		"nvrtcVersion": &f.version, "nvrtcCreateProgram": &f.create, "nvrtcCompileProgram": &f.compile,
		"nvrtcGetProgramLogSize": &f.logSize, "nvrtcGetProgramLog": &f.log, "nvrtcGetPTXSize": &f.ptxSize,
		"nvrtcGetPTX": &f.ptx, "nvrtcDestroyProgram": &f.destroy, "nvrtcGetErrorString": &f.errStr,
	}
	opt := map[string]*uintptr{"nvrtcGetCUBINSize": &f.cubinSize, "nvrtcGetCUBIN": &f.cubin,
		"nvrtcGetNumSupportedArchs": &f.numArchs, "nvrtcGetSupportedArchs": &f.archs}
	if err := lib.Syms(req, opt); err != nil {
		return nil, f, err
	}
	return lib, f, nil
}

func (l *Lib) cVersion() (int, int, int) {
	var a, b C.int
	code := C.n_version(C.uintptr_t(l.f.version), &a, &b)
	return int(a), int(b), int(code)
}

func (l *Lib) cErrString(code int) string {
	if p := C.n_str(C.uintptr_t(l.f.errStr), C.int(code)); p != nil {
		return C.GoString(p)
	}
	return ResultName(code)
}

func (l *Lib) cArchs() []int {
	var n C.int
	if C.n_int(C.uintptr_t(l.f.numArchs), &n) != 0 || n <= 0 || n > 256 {
		return nil
	}
	out := make([]C.int, n)
	if C.n_archs(C.uintptr_t(l.f.archs), &out[0]) != 0 {
		return nil
	}
	archs := make([]int, n)
	for i, a := range out {
		archs[i] = int(a)
	}
	return archs
}

// cCompile compiles src and returns the CUBIN (cubin) or PTX image, the log and the
// nvrtcResult. The source, name and options live in C memory for the call.
func (l *Lib) cCompile(src, name string, opts []string, cubin bool) ([]byte, string, int) {
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	copts := (**C.char)(C.calloc(C.size_t(len(opts)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(copts))
	ov := unsafe.Slice(copts, len(opts)+1)
	for i, o := range opts {
		ov[i] = C.CString(o)
		defer C.free(unsafe.Pointer(ov[i]))
	}
	var prog C.uintptr_t
	var created C.int
	code := int(C.n_create_compile(C.uintptr_t(l.f.create), C.uintptr_t(l.f.compile), &prog, csrc, cname, C.int(len(opts)), copts, &created))
	if created == 0 {
		return nil, "", code
	}
	defer C.n_destroy(C.uintptr_t(l.f.destroy), prog)
	log := l.fetch(l.f.logSize, l.f.log, prog, true)
	if code != success {
		return nil, string(log), code
	}
	var img []byte
	if cubin {
		img = l.fetch(l.f.cubinSize, l.f.cubin, prog, false)
	} else {
		img = l.fetch(l.f.ptxSize, l.f.ptx, prog, false)
	}
	return img, string(log), success
}

// fetch reads one of the program's outputs (log, PTX or CUBIN); text outputs drop
// their trailing NUL.
func (l *Lib) fetch(sizeFn, getFn uintptr, prog C.uintptr_t, text bool) []byte {
	var n C.size_t
	if C.n_size(C.uintptr_t(sizeFn), prog, &n) != 0 || n == 0 {
		return nil
	}
	buf := (*C.char)(C.malloc(n))
	defer C.free(unsafe.Pointer(buf))
	if C.n_get(C.uintptr_t(getFn), prog, buf) != 0 {
		return nil
	}
	b := C.GoBytes(unsafe.Pointer(buf), C.int(n))
	if text {
		for len(b) > 0 && b[len(b)-1] == 0 {
			b = b[:len(b)-1]
		}
	}
	return b
}
