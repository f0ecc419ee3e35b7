/* Fake libcublas.so.12 for goccl's tests: the _v2 handle API on the fake libcudart's
 * host "device memory". cublasSgemm_v2 checks its arguments as cuBLAS does
 * (CUBLAS_STATUS_INVALID_VALUE = 7), copies alpha and beta (host pointers, read before
 * it returns) and queues a column-major product on the handle's stream: each C element
 * a float sum over k in order. A handle remembers the device current when it was made;
 * a call from a thread with another current device fails with 14 (INTERNAL_ERROR), to
 * catch callers that do not select the device in the same C call. Calls go to
 * $FAKE_LOG. The legacy unsuffixed cublasSgemm is exported with a poisoned body, so a
 * loader that asks for it instead of cublasSgemm_v2 fails loudly. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake.h"

#define FAIL(name) do { int _c = fake_fail(name); if (_c) return _c; } while (0)
int cudaGetDevice(int *d);

struct handle { int dev; void *stream; int mode; };

static int here(struct handle *h) {
	int d = -1;
	cudaGetDevice(&d);
	return d == h->dev;
}

int cublasCreate_v2(void **out) {
	FAIL("cublasCreate_v2");
	struct handle *h = calloc(1, sizeof *h);
	cudaGetDevice(&h->dev);
	*out = h;
	fake_log("cublasCreate_v2 dev=%d", h->dev);
	return 0;
}
int cublasDestroy_v2(void *p) {
	struct handle *h = p;
	if (!h) return 1;
	fake_log("cublasDestroy_v2 dev=%d", h->dev);
	free(h);
	return 0;
}
int cublasSetStream_v2(void *p, void *s) {
	struct handle *h = p;
	if (!h) return 1;
	if (!here(h)) return 14;
	h->stream = s;
	fake_log("cublasSetStream_v2 dev=%d stream=%p", h->dev, s);
	return 0;
}
int cublasGetVersion_v2(void *p, int *v) { (void)p; *v = 120604; return 0; }
int cublasSetMathMode(void *p, int mode) {
	struct handle *h = p;
	h->mode = mode;
	fake_log("cublasSetMathMode dev=%d mode=%d", h->dev, mode);
	return 0;
}
const char *cublasGetStatusString(int s) { return s == 0 ? "success" : "fake cuBLAS error"; }
int cublasSgemm(void) { abort(); } /* the legacy API: never to be called */

struct gemm {
	struct fake_op op;
	int ta, tb, m, n, k, lda, ldb, ldc;
	float alpha, beta;
	const float *a, *b;
	float *c;
};
static int run_gemm(struct fake_op *op) {
	struct gemm *g = (struct gemm *)op;
	for (int j = 0; j < g->n; j++) {
		for (int i = 0; i < g->m; i++) {
			float acc = 0;
			for (int l = 0; l < g->k; l++) {
				float x = g->ta ? g->a[l + (size_t)i * g->lda] : g->a[i + (size_t)l * g->lda];
				float y = g->tb ? g->b[j + (size_t)l * g->ldb] : g->b[l + (size_t)j * g->ldb];
				acc += x * y;
			}
			float *c = &g->c[i + (size_t)j * g->ldc];
			*c = g->beta == 0 ? g->alpha * acc : g->alpha * acc + g->beta * *c;
		}
	}
	return 1;
}
static int imax(int a, int b) { return a > b ? a : b; }
int cublasSgemm_v2(void *p, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
		const float *b, int ldb, const float *beta, float *c, int ldc) {
	FAIL("cublasSgemm_v2");
	struct handle *h = p;
	if (!h) return 1;
	if (!here(h)) return 14;
	if (ta < 0 || ta > 1 || tb < 0 || tb > 1 || m < 0 || n < 0 || k < 0) return 7;
	if (lda < imax(1, ta ? k : m) || ldb < imax(1, tb ? n : k) || ldc < imax(1, m)) return 7;
	fake_log("cublasSgemm_v2 dev=%d ta=%d tb=%d m=%d n=%d k=%d lda=%d ldb=%d ldc=%d alpha=%g beta=%g stream=%p",
		h->dev, ta, tb, m, n, k, lda, ldb, ldc, *alpha, *beta, h->stream);
	struct gemm *g = calloc(1, sizeof *g);
	g->op.try_run = run_gemm;
	g->ta = ta; g->tb = tb; g->m = m; g->n = n; g->k = k; g->lda = lda; g->ldb = ldb; g->ldc = ldc;
	g->alpha = *alpha; g->beta = *beta; g->a = a; g->b = b; g->c = c;
	fake_lock();
	fake_enqueue(h->stream, &g->op);
	fake_progress();
	fake_unlock();
	return 0;
}
