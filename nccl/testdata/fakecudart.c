/* Fake libcudart.so.12: "device memory" is host memory, streams are in-order queues
 * that fake_progress drains, the current device is thread-local like CUDA's. Every call
 * is appended to $FAKE_LOG with the calling thread's current device. See fake.h. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fake.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t logmu = PTHREAD_MUTEX_INITIALIZER;
static __thread int cur_dev = 0;

void fake_lock(void) { pthread_mutex_lock(&mu); }
void fake_unlock(void) { pthread_mutex_unlock(&mu); }
int fake_cur_dev(void) { return cur_dev; }

void fake_log(const char *fmt, ...) {
	const char *path = getenv("FAKE_LOG");
	if (!path || !*path) return;
	pthread_mutex_lock(&logmu);
	FILE *f = fopen(path, "a");
	if (f) {
		va_list ap;
		va_start(ap, fmt);
		vfprintf(f, fmt, ap);
		va_end(ap);
		fputc('\n', f);
		fclose(f);
	}
	pthread_mutex_unlock(&logmu);
}

int fake_fail(const char *name) {
	const char *spec = getenv("FAKE_FAIL");
	if (!spec) return 0;
	size_t n = strlen(name);
	for (const char *p = spec; p && *p;) {
		if (strncmp(p, name, n) == 0 && p[n] == '=') return atoi(p + n + 1);
		p = strchr(p, ',');
		if (p) p++;
	}
	return 0;
}

static int ndevices(void) {
	const char *s = getenv("FAKE_CUDA_DEVICES");
	return s ? atoi(s) : 2;
}

/* ---- allocations (for cudaPointerGetAttributes) ---- */
struct alloc { uintptr_t base; size_t n; int dev; int type; struct alloc *next; };
static struct alloc *allocs;

static void track(void *p, size_t n, int dev, int type) {
	struct alloc *a = calloc(1, sizeof *a);
	a->base = (uintptr_t)p; a->n = n; a->dev = dev; a->type = type;
	fake_lock(); a->next = allocs; allocs = a; fake_unlock();
}
static int untrack(void *p, int type) {
	int found = 0;
	fake_lock();
	for (struct alloc **pp = &allocs; *pp; pp = &(*pp)->next) {
		if ((*pp)->base == (uintptr_t)p && (*pp)->type == type) {
			struct alloc *a = *pp; *pp = a->next; free(a); found = 1; break;
		}
	}
	fake_unlock();
	return found;
}

/* ---- streams ---- */
struct stream { int dev; struct fake_op *head, *tail; struct stream *next; };
static struct stream *streams;

void fake_enqueue(void *s, struct fake_op *op) {
	struct stream *st = s;
	op->next = 0;
	if (!st) { while (!op->try_run(op)) { fake_progress(); } free(op); return; }
	if (st->tail) st->tail->next = op; else st->head = op;
	st->tail = op;
}

void fake_progress(void) {
	for (int moved = 1; moved;) {
		moved = 0;
		for (struct stream *st = streams; st; st = st->next) {
			while (st->head && st->head->try_run(st->head)) {
				struct fake_op *op = st->head;
				st->head = op->next;
				if (!st->head) st->tail = 0;
				free(op);
				moved = 1;
			}
		}
	}
}

#define FAIL(name) do { int _c = fake_fail(name); if (_c) return _c; } while (0)

int cudaGetDeviceCount(int *n) {
	FAIL("cudaGetDeviceCount");
	*n = ndevices();
	fake_log("cudaGetDeviceCount n=%d", *n);
	return *n > 0 ? 0 : 100;
}
int cudaSetDevice(int d) {
	FAIL("cudaSetDevice");
	if (d < 0 || d >= ndevices()) return 101;
	cur_dev = d;
	return 0;
}
int cudaGetDevice(int *d) { *d = cur_dev; return 0; }
int cudaDriverGetVersion(int *v) { *v = 12080; return 0; }
int cudaRuntimeGetVersion(int *v) { *v = 12060; return 0; }

int cudaMalloc(void **p, size_t n) {
	FAIL("cudaMalloc");
	*p = malloc(n ? n : 1);
	if (!*p) return 2;
	memset(*p, 0xEE, n); /* garbage, as real device memory would hold */
	track(*p, n ? n : 1, cur_dev, 2);
	fake_log("cudaMalloc dev=%d n=%zu ptr=%p", cur_dev, n, *p);
	return 0;
}
int cudaFree(void *p) {
	fake_log("cudaFree dev=%d ptr=%p", cur_dev, p);
	if (!p) return 0;
	if (!untrack(p, 2)) return 1;
	free(p);
	return 0;
}
int cudaHostAlloc(void **p, size_t n, unsigned flags) {
	FAIL("cudaHostAlloc");
	*p = malloc(n ? n : 1);
	if (!*p) return 2;
	track(*p, n ? n : 1, cur_dev, 1);
	fake_log("cudaHostAlloc dev=%d n=%zu flags=%u", cur_dev, n, flags);
	return 0;
}
int cudaFreeHost(void *p) {
	fake_log("cudaFreeHost ptr=%p", p);
	if (!untrack(p, 1)) return 1;
	free(p);
	return 0;
}
int cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
	FAIL("cudaMemcpy");
	if (kind < 0 || kind > 4) return 21; /* cudaErrorInvalidMemcpyDirection */
	fake_log("cudaMemcpy dev=%d n=%zu kind=%d", cur_dev, n, kind);
	if (n) memmove(dst, src, n);
	return 0;
}
int cudaMemset(void *p, int v, size_t n) {
	fake_log("cudaMemset dev=%d n=%zu v=%d", cur_dev, n, v);
	memset(p, v, n);
	return 0;
}

struct copyop { struct fake_op op; void *dst; const void *src; size_t n; };
static int run_copy(struct fake_op *op) {
	struct copyop *c = (struct copyop *)op;
	if (c->n) memmove(c->dst, c->src, c->n);
	return 1;
}
int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream) {
	FAIL("cudaMemcpyAsync");
	if (kind < 0 || kind > 4) return 21;
	fake_log("cudaMemcpyAsync dev=%d n=%zu kind=%d stream=%p", cur_dev, n, kind, stream);
	struct copyop *c = calloc(1, sizeof *c);
	c->op.try_run = run_copy; c->dst = dst; c->src = src; c->n = n;
	fake_lock(); fake_enqueue(stream, &c->op); fake_progress(); fake_unlock();
	return 0;
}

int cudaStreamCreateWithFlags(void **s, unsigned flags) {
	FAIL("cudaStreamCreateWithFlags");
	struct stream *st = calloc(1, sizeof *st);
	st->dev = cur_dev;
	fake_lock(); st->next = streams; streams = st; fake_unlock();
	*s = st;
	fake_log("cudaStreamCreateWithFlags dev=%d flags=%u stream=%p", cur_dev, flags, (void *)st);
	return 0;
}
int cudaStreamQuery(void *s) {
	struct stream *st = s;
	fake_lock(); fake_progress(); int busy = st->head != 0; fake_unlock();
	return busy ? 600 : 0;
}
int cudaStreamSynchronize(void *s) {
	for (int i = 0; i < 100000; i++) { /* 10 s, then report instead of hanging a test */
		if (cudaStreamQuery(s) == 0) return 0;
		usleep(100);
	}
	return 999;
}
int cudaStreamDestroy(void *s) {
	fake_log("cudaStreamDestroy stream=%p", s);
	fake_lock();
	for (struct stream **pp = &streams; *pp; pp = &(*pp)->next)
		if (*pp == s) { *pp = ((struct stream *)s)->next; break; }
	fake_unlock();
	/* Like CUDA, pending work is abandoned to finish on its own; the fake just leaks it. */
	return 0;
}
int cudaDeviceSynchronize(void) { fake_lock(); fake_progress(); fake_unlock(); return 0; }

struct event { int recorded; double t; };
struct recop { struct fake_op op; struct event *ev; };
static double now_ms(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6; }
static int run_record(struct fake_op *op) { struct recop *r = (struct recop *)op; r->ev->t = now_ms(); r->ev->recorded = 1; return 1; }
int cudaEventCreateWithFlags(void **e, unsigned flags) {
	*e = calloc(1, sizeof(struct event));
	fake_log("cudaEventCreateWithFlags dev=%d flags=%u", cur_dev, flags);
	return 0;
}
int cudaEventRecord(void *e, void *stream) {
	struct recop *r = calloc(1, sizeof *r);
	r->op.try_run = run_record; r->ev = e;
	fake_lock(); r->ev->recorded = 0; fake_enqueue(stream, &r->op); fake_progress(); fake_unlock();
	return 0;
}
int cudaEventQuery(void *e) { fake_lock(); fake_progress(); int ok = ((struct event *)e)->recorded; fake_unlock(); return ok ? 0 : 600; }
int cudaEventSynchronize(void *e) { while (cudaEventQuery(e) != 0) usleep(50); return 0; }
int cudaEventDestroy(void *e) { free(e); return 0; }
int cudaEventElapsedTime(float *ms, void *start, void *end) {
	struct event *a = start, *b = end;
	if (!a->recorded || !b->recorded) return 600;
	*ms = (float)(b->t - a->t);
	return 0;
}
int cudaStreamWaitEvent(void *s, void *e, unsigned flags) { (void)s; (void)e; (void)flags; return 0; }

struct ptrattr { int type; int device; void *dptr; void *hptr; };
int cudaPointerGetAttributes(struct ptrattr *a, const void *p) {
	memset(a, 0, sizeof *a);
	fake_lock();
	for (struct alloc *x = allocs; x; x = x->next) {
		if ((uintptr_t)p >= x->base && (uintptr_t)p < x->base + x->n) {
			a->type = x->type; a->device = x->dev;
			if (x->type == 2) a->dptr = (void *)p; else a->hptr = (void *)p;
			break;
		}
	}
	fake_unlock();
	return 0;
}
int cudaDeviceGetAttribute(int *v, int attr, int dev) {
	if (dev < 0 || dev >= ndevices()) return 101;
	switch (attr) {
	case 16: *v = 132; return 0;  /* SM count */
	case 75: *v = 9; return 0;    /* compute capability major */
	case 76: *v = 0; return 0;
	}
	return 1;
}
int cudaDeviceGetPCIBusId(char *buf, int len, int dev) {
	if (dev < 0 || dev >= ndevices()) return 101;
	snprintf(buf, len, "0000:%02X:00.0", 0x18 + dev);
	return 0;
}
int cudaMemGetInfo(size_t *free_, size_t *total) { *free_ = (size_t)140 << 30; *total = (size_t)141 << 30; return 0; }
int cudaGetLastError(void) { return 0; }

const char *cudaGetErrorName(int e) {
	switch (e) {
	case 0: return "cudaSuccess";
	case 1: return "cudaErrorInvalidValue";
	case 2: return "cudaErrorMemoryAllocation";
	case 35: return "cudaErrorInsufficientDriver";
	case 100: return "cudaErrorNoDevice";
	case 101: return "cudaErrorInvalidDevice";
	case 600: return "cudaErrorNotReady";
	case 700: return "cudaErrorIllegalAddress";
	}
	return "cudaErrorUnknown";
}
const char *cudaGetErrorString(int e) {
	switch (e) {
	case 0: return "no error";
	case 1: return "invalid argument";
	case 2: return "out of memory";
	case 35: return "CUDA driver version is insufficient for CUDA runtime version";
	case 100: return "no CUDA-capable device is detected";
	case 101: return "invalid device ordinal";
	case 700: return "an illegal memory access was encountered";
	}
	return "unknown error";
}
