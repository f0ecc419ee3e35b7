/* Fake libnvrtc.so.12 for goccl's kernel tests. nvrtcCompileProgram compiles the CUDA
 * source with the host C++ compiler (FAKE_CXX) and kernel_shim.h (FAKE_SHIM), defining
 * GOCCL_HOST_SHIM, into a shared object under FAKE_WORKDIR; the "CUBIN" (for sm_XX)
 * or "PTX" (for compute_XX) it returns is the text GOCCL-FAKE-IMAGE\n<path>, which the
 * fake libcuda loads. Built with -DFAKE_OLD it lacks the CUBIN getters, like NVRTC
 * before 11.1, so the PTX fallback is exercised. Calls and options go to $FAKE_LOG. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "fake.h"

#define FAIL(name) do { int _c = fake_fail(name); if (_c) return _c; } while (0)

struct prog { char *src, *name, *log, *image; size_t imagen; int compiled, cubin; };

int nvrtcVersion(int *maj, int *min) { *maj = 12; *min = 6; return 0; }

static const int archs[] = {75, 80, 86, 89, 90};
static int maxarch(void) {
	const char *s = getenv("FAKE_NVRTC_MAXARCH");
	return s && *s ? atoi(s) : 90;
}
int nvrtcGetNumSupportedArchs(int *n) {
	*n = 0;
	for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) if (archs[i] <= maxarch()) (*n)++;
	return 0;
}
int nvrtcGetSupportedArchs(int *out) {
	int k = 0;
	for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) if (archs[i] <= maxarch()) out[k++] = archs[i];
	return 0;
}

int nvrtcCreateProgram(void **p, const char *src, const char *name, int nh, const char *const *h, const char *const *hn) {
	FAIL("nvrtcCreateProgram");
	if (!p || !src || nh < 0) return 3;
	struct prog *pr = calloc(1, sizeof *pr);
	pr->src = strdup(src);
	pr->name = strdup(name ? name : "default_program");
	*p = pr;
	fake_log("nvrtcCreateProgram name=%s bytes=%zu headers=%d", pr->name, strlen(src), nh);
	return 0;
}

static char *slurp(const char *path) {
	FILE *f = fopen(path, "r");
	if (!f) return strdup("");
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = calloc(1, n + 1);
	if (fread(b, 1, n, f) != (size_t)n) b[0] = 0;
	fclose(f);
	return b;
}

int nvrtcCompileProgram(void *p, int n, const char *const *opts) {
	FAIL("nvrtcCompileProgram");
	struct prog *pr = p;
	if (!pr || n < 0 || (n && !opts)) return 3;
	char all[2048] = "";
	int arch = 52, virt = 1; /* NVRTC 12's default: compute_52 */
	for (int i = 0; i < n; i++) {
		strncat(all, opts[i], sizeof all - strlen(all) - 2);
		strncat(all, " ", sizeof all - strlen(all) - 1);
		const char *a = 0;
		if (!strncmp(opts[i], "--gpu-architecture=", 19)) a = opts[i] + 19;
		else if (!strncmp(opts[i], "-arch=", 6)) a = opts[i] + 6;
		if (a) {
			if (!strncmp(a, "sm_", 3)) { virt = 0; arch = atoi(a + 3); }
			else if (!strncmp(a, "compute_", 8)) { virt = 1; arch = atoi(a + 8); }
			else { free(pr->log); pr->log = strdup("nvrtc: error: invalid value for --gpu-architecture"); return 5; }
		}
	}
	fake_log("nvrtcCompileProgram name=%s opts=%s", pr->name, all);
	if (arch > maxarch()) {
		free(pr->log);
		pr->log = strdup("nvrtc: error: invalid value for --gpu-architecture (-arch)");
		return 5;
	}
	static int seq;
	char base[4096], cmd[16384];
	snprintf(base, sizeof base, "%s/k%d-%d-%d", FAKE_WORKDIR, (int)getpid(), __sync_add_and_fetch(&seq, 1), arch);
	char src[4200], so[4200], log[4200];
	snprintf(src, sizeof src, "%s.cu", base);
	snprintf(so, sizeof so, "%s.so", base);
	snprintf(log, sizeof log, "%s.log", base);
	FILE *f = fopen(src, "w");
	if (!f) return 11;
	fputs(pr->src, f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "'%s' -x c++ -O1 -fPIC -shared -ffp-contract=off -Wall -Werror -DGOCCL_HOST_SHIM -include '%s' -o '%s' '%s' >'%s' 2>&1",
		FAKE_CXX, FAKE_SHIM, so, src, log);
	int rc = system(cmd);
	free(pr->log);
	pr->log = slurp(log);
	if (rc != 0) return 6;
	pr->compiled = 1;
	pr->cubin = !virt;
	size_t need = strlen("GOCCL-FAKE-IMAGE\n") + strlen(so) + 2;
	pr->image = malloc(need);
	snprintf(pr->image, need, "GOCCL-FAKE-IMAGE\n%s", so);
	pr->imagen = strlen(pr->image) + 1;
	return 0;
}

int nvrtcGetProgramLogSize(void *p, size_t *n) { struct prog *pr = p; *n = (pr->log ? strlen(pr->log) : 0) + 1; return 0; }
int nvrtcGetProgramLog(void *p, char *out) { struct prog *pr = p; strcpy(out, pr->log ? pr->log : ""); return 0; }
int nvrtcGetPTXSize(void *p, size_t *n) {
	struct prog *pr = p;
	if (!pr->compiled) return 4;
	*n = pr->imagen;
	return 0;
}
int nvrtcGetPTX(void *p, char *out) {
	struct prog *pr = p;
	if (!pr->compiled) return 4;
	memcpy(out, pr->image, pr->imagen);
	return 0;
}
#ifndef FAKE_OLD
int nvrtcGetCUBINSize(void *p, size_t *n) {
	struct prog *pr = p;
	if (!pr->compiled) return 4;
	*n = pr->cubin ? pr->imagen : 0; /* no CUBIN for a virtual architecture */
	return 0;
}
int nvrtcGetCUBIN(void *p, char *out) {
	struct prog *pr = p;
	if (!pr->compiled || !pr->cubin) return 4;
	memcpy(out, pr->image, pr->imagen);
	return 0;
}
#endif
int nvrtcDestroyProgram(void **p) {
	if (!p || !*p) return 3;
	struct prog *pr = *p;
	free(pr->src); free(pr->name); free(pr->log); free(pr->image); free(pr);
	*p = 0;
	return 0;
}
const char *nvrtcGetErrorString(int r) {
	switch (r) {
	case 0: return "NVRTC_SUCCESS";
	case 3: return "NVRTC_ERROR_INVALID_INPUT";
	case 4: return "NVRTC_ERROR_INVALID_PROGRAM";
	case 5: return "NVRTC_ERROR_INVALID_OPTION";
	case 6: return "NVRTC_ERROR_COMPILATION";
	case 7: return "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE";
	}
	return "NVRTC_ERROR_INTERNAL_ERROR";
}
