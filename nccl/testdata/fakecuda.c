/* Fake libcuda.so.1 (the driver API) for goccl's kernel tests. A "module image" is the
 * text GOCCL-FAKE-IMAGE\n<path>, where <path> is a shared object the fake libnvrtc
 * built from the kernel source with the host C++ compiler and kernel_shim.h;
 * cuModuleGetFunction finds NAME__host in it, and cuLaunchKernel queues a run of the
 * whole grid, one thread at a time, on the fake libcudart's stream. Contexts are per
 * OS thread, like CUDA's: a call without a current context fails with
 * CUDA_ERROR_INVALID_CONTEXT (201), which is what goccl's set-in-the-same-C-call
 * trampolines must prevent. Every call is logged to $FAKE_LOG. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake.h"

#define FAIL(name) do { int _c = fake_fail(name); if (_c) return _c; } while (0)
#define MAGIC "GOCCL-FAKE-IMAGE\n"

struct ctx { int dev; int retained; };
static struct ctx ctxs[16];
static __thread struct ctx *cur;
static int inited;

static int ndev(void) {
	const char *s = getenv("FAKE_CUDA_DEVICES");
	int n = s ? atoi(s) : 2;
	return n > 16 ? 16 : n;
}

int cuInit(unsigned flags) {
	FAIL("cuInit");
	if (flags) return 1;
	inited = 1;
	return ndev() > 0 ? 0 : 100;
}
int cuDriverGetVersion(int *v) { *v = 12080; return 0; }
int cuDeviceGetCount(int *n) {
	if (!inited) return 3;
	*n = ndev();
	return 0;
}
int cuDeviceGet(int *d, int ord) {
	if (!inited) return 3;
	if (ord < 0 || ord >= ndev()) return 101;
	*d = ord;
	return 0;
}
int cuDeviceGetAttribute(int *v, int attr, int dev) {
	FAIL("cuDeviceGetAttribute");
	if (!inited) return 3;
	if (dev < 0 || dev >= ndev()) return 101;
	const char *cc = getenv("FAKE_CC");
	int arch = cc && *cc ? atoi(cc) : 90;
	switch (attr) {
	case 16: *v = 4; return 0; /* SM count: small, so the fake's grids stay short */
	case 75: *v = arch / 10; return 0;
	case 76: *v = arch % 10; return 0;
	case 1: *v = 1024; return 0;
	}
	return 1;
}
int cuDevicePrimaryCtxRetain(void **c, int dev) {
	FAIL("cuDevicePrimaryCtxRetain");
	if (!inited) return 3;
	if (dev < 0 || dev >= ndev()) return 101;
	ctxs[dev].dev = dev;
	ctxs[dev].retained++;
	*c = &ctxs[dev];
	fake_log("cuDevicePrimaryCtxRetain dev=%d", dev);
	return 0;
}
int cuCtxSetCurrent(void *c) {
	FAIL("cuCtxSetCurrent");
	cur = c;
	return 0;
}

struct module { void *h; int dev; };
typedef struct { unsigned x, y, z; } dim3_t; /* the ABI of the shim's goccl_dim3 */
struct func { void (*run)(void **, dim3_t, dim3_t); int nargs; int dev; char name[96]; };

static void put_log(unsigned n, int *opts, void **vals, const char *msg) {
	char *buf = 0;
	size_t size = 0;
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == 5) buf = vals[i];
		if (opts[i] == 6) size = (size_t)(uintptr_t)vals[i];
	}
	if (buf && size) snprintf(buf, size, "%s", msg);
}

int cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals) {
	FAIL("cuModuleLoadDataEx");
	if (!cur) return 201;
	const char *img = image;
	if (strncmp(img, MAGIC, strlen(MAGIC)) != 0) {
		put_log(n, opts, vals, "fake libcuda: not an image from the fake libnvrtc");
		return 200;
	}
	char path[4096];
	snprintf(path, sizeof path, "%s", img + strlen(MAGIC));
	path[strcspn(path, "\n")] = 0;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		put_log(n, opts, vals, dlerror());
		return 200;
	}
	struct module *mod = calloc(1, sizeof *mod);
	mod->h = h;
	mod->dev = cur->dev;
	*m = mod;
	fake_log("cuModuleLoadDataEx dev=%d", cur->dev);
	return 0;
}
int cuModuleGetFunction(void **f, void *m, const char *name) {
	if (!cur) return 201;
	struct module *mod = m;
	char sym[160];
	snprintf(sym, sizeof sym, "%s__host", name);
	void *run = dlsym(mod->h, sym);
	snprintf(sym, sizeof sym, "%s__nargs", name);
	const int *nargs = dlsym(mod->h, sym);
	if (!run || !nargs) return 500;
	struct func *fn = calloc(1, sizeof *fn);
	fn->run = (void (*)(void **, dim3_t, dim3_t))run;
	fn->nargs = *nargs;
	fn->dev = mod->dev;
	snprintf(fn->name, sizeof fn->name, "%s", name);
	*f = fn;
	return 0;
}
int cuModuleUnload(void *m) {
	if (!cur) return 201;
	struct module *mod = m;
	fake_log("cuModuleUnload dev=%d", mod->dev);
	/* The shared object stays loaded: functions looked up from it may still be queued. */
	free(mod);
	return 0;
}

struct launch { struct fake_op op; struct func *fn; dim3_t g, b; uint64_t slots[32]; void *ptrs[32]; };
static int run_launch(struct fake_op *op) {
	struct launch *l = (struct launch *)op;
	l->fn->run(l->ptrs, l->g, l->b);
	return 1;
}
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
		unsigned shm, void *stream, void **params, void **extra) {
	FAIL("cuLaunchKernel");
	if (!cur) return 201;
	struct func *fn = f;
	if (!fn) return 400;
	if (fn->dev != cur->dev) return 400; /* a function of another context */
	if (!gx || !bx || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx > 1024 || extra) return 1;
	if (fn->nargs > 32 || (fn->nargs && !params)) return 1;
	struct launch *l = calloc(1, sizeof *l);
	l->op.try_run = run_launch;
	l->fn = fn;
	l->g = (dim3_t){gx, 1, 1};
	l->b = (dim3_t){bx, 1, 1};
	/* Like the real driver, copy the argument values now: the caller's slots die when
	 * cuLaunchKernel returns. goccl's slots are 8 bytes each. */
	for (int i = 0; i < fn->nargs; i++) {
		memcpy(&l->slots[i], params[i], 8);
		l->ptrs[i] = &l->slots[i];
	}
	fake_log("cuLaunchKernel %s dev=%d grid=%u block=%u shared=%u stream=%p", fn->name, cur->dev, gx, bx, shm, stream);
	fake_lock();
	fake_enqueue(stream, &l->op);
	fake_progress();
	fake_unlock();
	return 0;
}

static const char *names[][2] = {
	{"0", "CUDA_SUCCESS"}, {"1", "CUDA_ERROR_INVALID_VALUE"}, {"3", "CUDA_ERROR_NOT_INITIALIZED"},
	{"100", "CUDA_ERROR_NO_DEVICE"}, {"101", "CUDA_ERROR_INVALID_DEVICE"}, {"200", "CUDA_ERROR_INVALID_IMAGE"},
	{"201", "CUDA_ERROR_INVALID_CONTEXT"}, {"209", "CUDA_ERROR_NO_BINARY_FOR_GPU"}, {"400", "CUDA_ERROR_INVALID_HANDLE"},
	{"500", "CUDA_ERROR_NOT_FOUND"}, {"222", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
};
int cuGetErrorName(int e, const char **s) {
	char buf[16];
	snprintf(buf, sizeof buf, "%d", e);
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(names[i][0], buf)) { *s = names[i][1]; return 0; }
	*s = 0;
	return 1;
}
int cuGetErrorString(int e, const char **s) {
	switch (e) {
	case 100: *s = "no CUDA-capable device is detected"; return 0;
	case 201: *s = "invalid device context"; return 0;
	case 200: *s = "device kernel image is invalid"; return 0;
	case 500: *s = "named symbol not found"; return 0;
	}
	*s = "fake error";
	return 0;
}
