//go:build linux && cgo

package cublas

/*
#include <stdint.h>

#define SETDEV_FAILED 0x40000000
typedef int (*setdev_t)(int);
// SD selects the handle's device in the same C call as the cuBLAS call.
#define SD(sd, dev) do { int _r = ((setdev_t)(sd))(dev); if (_r) return _r | SETDEV_FAILED; } while (0)

static int b_create(uintptr_t sd, int dev, uintptr_t f, uintptr_t* out) {
	SD(sd, dev); void* h = 0; int r = ((int(*)(void**))f)(&h); *out = (uintptr_t)h; return r;
}
static int b_handle(uintptr_t sd, int dev, uintptr_t f, uintptr_t h) { SD(sd, dev); return ((int(*)(void*))f)((void*)h); }
static int b_stream(uintptr_t sd, int dev, uintptr_t f, uintptr_t h, uintptr_t s) {
	SD(sd, dev); return ((int(*)(void*, void*))f)((void*)h, (void*)s);
}
static int b_mode(uintptr_t sd, int dev, uintptr_t f, uintptr_t h, int mode) {
	SD(sd, dev); return ((int(*)(void*, int))f)((void*)h, mode);
}
static int b_version(uintptr_t sd, int dev, uintptr_t f, uintptr_t h, int* v) {
	SD(sd, dev); return ((int(*)(void*, int*))f)((void*)h, v);
}
typedef int (*sgemm_t)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*, float*, int);
static int b_sgemm(uintptr_t sd, int dev, uintptr_t f, uintptr_t h, int ta, int tb, int m, int n, int k,
		float alpha, uintptr_t a, int lda, uintptr_t b, int ldb, float beta, uintptr_t c, int ldc) {
	SD(sd, dev);
	// alpha and beta are host pointers (CUBLAS_POINTER_MODE_HOST, the default), read
	// before cublasSgemm_v2 returns, so C stack slots are enough.
	return ((sgemm_t)f)((void*)h, ta, tb, m, n, k, &alpha, (const float*)a, lda, (const float*)b, ldb, &beta, (float*)c, ldc);
}
*/
import "C"

import "github.com/goccl/goccl/internal/dl"

func loadLib(s dl.Spec) (*dl.Lib, fns, error) {
	var f fns
	lib, err := dl.Open(s)
	if err != nil {
		return nil, f, err
	}
	req := map[string]*uintptr{"cublasCreate_v2": &f.create, "cublasDestroy_v2": &f.destroy,
		"cublasSetStream_v2": &f.setStream, "cublasSgemm_v2": &f.sgemm, "cublasGetVersion_v2": &f.version}
	opt := map[string]*uintptr{"cublasSetMathMode": &f.mathMode, "cublasGetStatusString": &f.statusString}
	if err := lib.Syms(req, opt); err != nil {
		return nil, f, err
	}
	return lib, f, nil
}

func (l *Lib) cCreate(sd uintptr, dev int) (uintptr, int) {
	var h C.uintptr_t
	code := C.b_create(C.uintptr_t(sd), C.int(dev), C.uintptr_t(l.f.create), &h)
	return uintptr(h), int(code)
}

func (l *Lib) cDestroy(sd uintptr, dev int, h uintptr) int {
	return int(C.b_handle(C.uintptr_t(sd), C.int(dev), C.uintptr_t(l.f.destroy), C.uintptr_t(h)))
}

func (l *Lib) cSetStream(sd uintptr, dev int, h, s uintptr) int {
	return int(C.b_stream(C.uintptr_t(sd), C.int(dev), C.uintptr_t(l.f.setStream), C.uintptr_t(h), C.uintptr_t(s)))
}

func (l *Lib) cMathMode(sd uintptr, dev int, h uintptr, mode int) int {
	return int(C.b_mode(C.uintptr_t(sd), C.int(dev), C.uintptr_t(l.f.mathMode), C.uintptr_t(h), C.int(mode)))
}

func (l *Lib) cVersion(sd uintptr, dev int, h uintptr) (int, int) {
	var v C.int
	code := C.b_version(C.uintptr_t(sd), C.int(dev), C.uintptr_t(l.f.version), C.uintptr_t(h), &v)
	return int(v), int(code)
}

func (l *Lib) cSgemm(sd uintptr, dev int, h uintptr, ta, tb, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) int {
	return int(C.b_sgemm(C.uintptr_t(sd), C.int(dev), C.uintptr_t(l.f.sgemm), C.uintptr_t(h), C.int(ta), C.int(tb),
		C.int(m), C.int(n), C.int(k), C.float(alpha), C.uintptr_t(a), C.int(lda), C.uintptr_t(b), C.int(ldb),
		C.float(beta), C.uintptr_t(c), C.int(ldc)))
}
