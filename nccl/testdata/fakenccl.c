/* Fake libnccl.so.2 over the fake libcudart (see fake.h): communicators of goroutine
 * ranks in one process, matched by the 128-byte unique id passed by value; send/recv
 * matched in FIFO order per (communicator, src, dst); collectives computed on the host
 * once every rank has reached the same position. Every call is logged to $FAKE_LOG.
 * Built twice: the default is NCCL 2.30.7; -DFAKE_OLD builds a 2.12.12 without the
 * symbols NCCL added later (ncclCommInitRankConfig, ncclGetLastError, ncclAlltoAll ...). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fake.h"

#ifdef FAKE_OLD
#define VERSION 21212
#else
#define VERSION 23007
#endif

enum { Success, UnhandledCuda, SystemError, InternalError, InvalidArgument, InvalidUsage, RemoteError, InProgress };

typedef struct { char internal[128]; } ncclUniqueId;
typedef struct {
	size_t size; unsigned magic, version; int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char *netName; int splitShare, trafficClass;
} config18; /* the 2.18 prefix goccl mirrors */

static const int dtsize[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

struct clique;
struct comm { struct clique *cl; int rank, dev, blocking, aborted, async; unsigned long seq; };
struct member { int kind; int done; struct comm *comm; const void *send; void *recv; size_t count; int dt, op, root, peer; unsigned long seq; };
struct clique { ncclUniqueId id; int nranks, joined; struct comm **comms; struct clique *next; };
static struct clique *cliques;
static unsigned long uidCounter;

static __thread char lastErr[256];
static void seterr(const char *m) { strncpy(lastErr, m, sizeof lastErr - 1); }

#define FAIL(name) do { int _c = fake_fail(name); if (_c) { seterr("fake injected failure in " name); return _c; } } while (0)

int ncclGetVersion(int *v) { *v = VERSION; return Success; }

int ncclGetUniqueId(ncclUniqueId *id) {
	FAIL("ncclGetUniqueId");
	fake_lock(); unsigned long c = ++uidCounter; fake_unlock();
	memcpy(id->internal, "FAKEUID", 8);
	memcpy(id->internal + 8, &c, 8);
	for (int i = 16; i < 128; i++) id->internal[i] = (char)(i * 31 + c);
	fake_log("ncclGetUniqueId counter=%lu", c);
	return Success;
}

static int uidValid(const ncclUniqueId *id) {
	unsigned long c;
	if (memcmp(id->internal, "FAKEUID", 8) != 0) return 0;
	memcpy(&c, id->internal + 8, 8);
	for (int i = 16; i < 128; i++) if (id->internal[i] != (char)(i * 31 + c)) return 0;
	return 1;
}

/* hostid is NCCL_HOSTID as NCCL would read it at init ("-" when unset). */
static const char *hostid(void) { const char *h = getenv("NCCL_HOSTID"); return h && *h ? h : "-"; }

static int initRank(struct comm **out, int nranks, ncclUniqueId id, int rank, int blocking) {
	if (!uidValid(&id)) { seterr("unique id corrupted (not passed by value?)"); return InvalidArgument; }
	if (nranks < 1 || rank < 0 || rank >= nranks) { seterr("bad rank or nranks"); return InvalidArgument; }
	fake_lock();
	struct clique *cl = cliques;
	while (cl && memcmp(&cl->id, &id, sizeof id) != 0) cl = cl->next;
	if (!cl) {
		cl = calloc(1, sizeof *cl);
		cl->id = id; cl->nranks = nranks; cl->comms = calloc(nranks, sizeof *cl->comms);
		cl->next = cliques; cliques = cl;
	}
	if (cl->nranks != nranks || cl->comms[rank]) { fake_unlock(); seterr("nranks differ or rank joined twice"); return InvalidUsage; }
	struct comm *c = calloc(1, sizeof *c);
	c->cl = cl; c->rank = rank; c->dev = fake_cur_dev(); c->blocking = blocking;
	cl->comms[rank] = c; cl->joined++;
	fake_unlock();
	*out = c;
	if (!blocking) { c->async = InProgress; return InProgress; }
	for (int i = 0; i < 100000; i++) { /* 10 s */
		fake_lock(); int all = cl->joined == cl->nranks; fake_unlock();
		if (all) return Success;
		usleep(100);
	}
	seterr("timed out waiting for peers in init");
	return SystemError;
}

int ncclCommInitRank(struct comm **comm, int nranks, ncclUniqueId id, int rank) {
	FAIL("ncclCommInitRank");
	fake_log("ncclCommInitRank dev=%d nranks=%d rank=%d uidok=%d hostid=%s", fake_cur_dev(), nranks, rank, uidValid(&id), hostid());
	return initRank(comm, nranks, id, rank, 1);
}

#ifndef FAKE_OLD
int ncclCommInitRankConfig(struct comm **comm, int nranks, ncclUniqueId id, int rank, config18 *cfg) {
	FAIL("ncclCommInitRankConfig");
	fake_log("ncclCommInitRankConfig dev=%d nranks=%d rank=%d uidok=%d size=%zu magic=0x%x version=%u blocking=%d cga=%d minCTAs=%d maxCTAs=%d netName=%s splitShare=%d trafficClass=%d hostid=%s",
		fake_cur_dev(), nranks, rank, uidValid(&id), cfg->size, cfg->magic, cfg->version, cfg->blocking,
		cfg->cgaClusterSize, cfg->minCTAs, cfg->maxCTAs, cfg->netName ? cfg->netName : "NULL", cfg->splitShare, cfg->trafficClass, hostid());
	if (cfg->magic != 0xcafebeef) { seterr("config not initialized via NCCL_CONFIG_INITIALIZER"); return InvalidArgument; }
	return initRank(comm, nranks, id, rank, cfg->blocking == 0 ? 0 : 1);
}
const char *ncclGetLastError(struct comm *c) { (void)c; return lastErr; }
int ncclCommFinalize(struct comm *c) { fake_log("ncclCommFinalize rank=%d", c->rank); return Success; }
#endif

int ncclCommGetAsyncError(struct comm *c, int *err) {
	int inj = fake_fail("ncclAsync");
	fake_lock();
	if (c->async == InProgress && c->cl->joined == c->cl->nranks) c->async = Success;
	*err = inj ? inj : c->async;
	fake_unlock();
	return Success;
}
int ncclCommCount(struct comm *c, int *n) { *n = c->cl->nranks; return Success; }
int ncclCommCuDevice(struct comm *c, int *d) { *d = c->dev; return Success; }
int ncclCommUserRank(struct comm *c, int *r) { *r = c->rank; return Success; }

static struct member **posted; /* every posted, unmatched p2p member */
static int nposted, capposted;

static void dropComm(struct comm *c) {
	for (int i = 0; i < nposted;) {
		if (posted[i]->comm == c) { posted[i]->done = 1; posted[i] = posted[--nposted]; } else i++;
	}
}
int ncclCommAbort(struct comm *c) {
	fake_log("ncclCommAbort rank=%d", c ? c->rank : -1);
	if (!c) return Success;
	fake_lock(); c->aborted = 1; dropComm(c); fake_progress(); fake_unlock();
	return Success;
}
int ncclCommDestroy(struct comm *c) {
	fake_log("ncclCommDestroy rank=%d", c ? c->rank : -1);
	if (!c) return Success;
	fake_lock(); c->aborted = 1; dropComm(c); fake_unlock();
	return Success;
}

const char *ncclGetErrorString(int r) {
	switch (r) {
	case Success: return "no error";
	case UnhandledCuda: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case SystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case InternalError: return "internal error - please report this issue to the NCCL developers";
	case InvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case InvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case RemoteError: return "remote process exited or there was a network error";
	case InProgress: return "NCCL operation in progress";
	}
	return "unknown result code";
}

/* ---- reductions ---- */
static float h2f(uint16_t h) {
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, f;
	if (e == 0) {
		if (m == 0) f = s;
		else { e = 127 - 15 + 1; while (!(m & 0x400)) { m <<= 1; e--; } m &= 0x3ff; f = s | (e << 23) | (m << 13); }
	} else if (e == 31) f = s | 0x7f800000 | (m << 13);
	else f = s | ((e + 127 - 15) << 23) | (m << 13);
	float r; memcpy(&r, &f, 4); return r;
}
static uint16_t f2h(float x) { /* round to nearest even; enough for the integer-valued test data */
	uint32_t f; memcpy(&f, &x, 4);
	uint32_t s = (f >> 16) & 0x8000; int e = (int)((f >> 23) & 0xff) - 127 + 15; uint32_t m = f & 0x7fffff;
	if (((f >> 23) & 0xff) == 0xff) return (uint16_t)(s | 0x7c00 | (m ? 0x200 : 0));
	if (e >= 31) return (uint16_t)(s | 0x7c00);
	if (e <= 0) return (uint16_t)s;
	uint32_t h = s | ((uint32_t)e << 10) | (m >> 13), rest = m & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
	return (uint16_t)h;
}
static float b2f(uint16_t b) { uint32_t f = (uint32_t)b << 16; float r; memcpy(&r, &f, 4); return r; }
static uint16_t f2b(float x) { uint32_t f; memcpy(&f, &x, 4); f += 0x7fff + ((f >> 16) & 1); return (uint16_t)(f >> 16); }

#define RED(T) do { T *d = dst; const T *s = src; for (size_t i = 0; i < n; i++) { T a = d[i], b = s[i]; \
	switch (op) { case 0: case 4: a = a + b; break; case 1: a = a * b; break; case 2: a = a > b ? a : b; break; case 3: a = a < b ? a : b; break; } d[i] = a; } } while (0)
#define DIV(T) do { T *d = dst; for (size_t i = 0; i < n; i++) d[i] = (T)(d[i] / (T)w); } while (0)

/* reduce src into dst (n elements); halves are reduced in float and rounded each step. */
static void reduce(void *dst, const void *src, size_t n, int dt, int op) {
	switch (dt) {
	case 0: RED(int8_t); break; case 1: RED(uint8_t); break; case 2: RED(int32_t); break; case 3: RED(uint32_t); break;
	case 4: RED(int64_t); break; case 5: RED(uint64_t); break; case 7: RED(float); break; case 8: RED(double); break;
	case 6: case 9: {
		uint16_t *d = dst; const uint16_t *s = src;
		for (size_t i = 0; i < n; i++) {
			float a = dt == 6 ? h2f(d[i]) : b2f(d[i]), b = dt == 6 ? h2f(s[i]) : b2f(s[i]);
			switch (op) { case 0: case 4: a += b; break; case 1: a *= b; break; case 2: a = a > b ? a : b; break; case 3: a = a < b ? a : b; break; }
			d[i] = dt == 6 ? f2h(a) : f2b(a);
		}
	}
	}
}
static void average(void *dst, size_t n, int dt, int w) {
	switch (dt) {
	case 0: DIV(int8_t); break; case 1: DIV(uint8_t); break; case 2: DIV(int32_t); break; case 3: DIV(uint32_t); break;
	case 4: DIV(int64_t); break; case 5: DIV(uint64_t); break; case 7: DIV(float); break; case 8: DIV(double); break;
	case 6: case 9: { uint16_t *d = dst; for (size_t i = 0; i < n; i++) d[i] = dt == 6 ? f2h(h2f(d[i]) / w) : f2b(b2f(d[i]) / w); } }
}

enum { KSend = 1, KRecv, KAllReduce, KBroadcast, KReduce, KAllGather, KReduceScatter, KAlltoAll, KGather, KScatter };

/* ---- collectives: matched by (clique, sequence number) ---- */
struct slot { struct clique *cl; unsigned long seq; int n; struct member **m; struct slot *next; };
static struct slot *slots;

static void runColl(struct slot *s) {
	struct member *m0 = s->m[0];
	int w = s->cl->nranks; size_t cnt = m0->count, es = dtsize[m0->dt], bytes = cnt * es;
	for (int r = 1; r < w; r++) {
		struct member *m = s->m[r];
		if (m->kind != m0->kind || m->count != cnt || m->dt != m0->dt || m->op != m0->op || m->root != m0->root) {
			fake_log("collective mismatch seq=%lu", s->seq);
			for (int i = 0; i < w; i++) { s->m[i]->comm->async = InvalidUsage; s->m[i]->done = 1; }
			return;
		}
	}
	size_t total = m0->kind == KAllGather || m0->kind == KReduceScatter || m0->kind == KAlltoAll ||
		m0->kind == KGather || m0->kind == KScatter ? bytes * w : bytes;
	char *tmp = malloc(total * w + 1); /* results computed aside, so in-place calls work */
	switch (m0->kind) {
	case KAllReduce: case KReduce:
		memcpy(tmp, s->m[0]->send, bytes);
		for (int r = 1; r < w; r++) reduce(tmp, s->m[r]->send, cnt, m0->dt, m0->op);
		if (m0->op == 4) average(tmp, cnt, m0->dt, w);
		for (int r = 0; r < w; r++) if (m0->kind == KAllReduce || r == m0->root) memcpy(s->m[r]->recv, tmp, bytes);
		break;
	case KBroadcast:
		memcpy(tmp, s->m[m0->root]->send, bytes);
		for (int r = 0; r < w; r++) memcpy(s->m[r]->recv, tmp, bytes);
		break;
	case KAllGather: case KGather:
		for (int r = 0; r < w; r++) memcpy(tmp + r * bytes, s->m[r]->send, bytes);
		for (int r = 0; r < w; r++) if (m0->kind == KAllGather || r == m0->root) memcpy(s->m[r]->recv, tmp, bytes * w);
		break;
	case KReduceScatter:
		for (int r = 0; r < w; r++) {
			memcpy(tmp + r * bytes, (const char *)s->m[0]->send + r * bytes, bytes);
			for (int i = 1; i < w; i++) reduce(tmp + r * bytes, (const char *)s->m[i]->send + r * bytes, cnt, m0->dt, m0->op);
			if (m0->op == 4) average(tmp + r * bytes, cnt, m0->dt, w);
		}
		for (int r = 0; r < w; r++) memcpy(s->m[r]->recv, tmp + r * bytes, bytes);
		break;
	case KScatter:
		memcpy(tmp, s->m[m0->root]->send, bytes * w);
		for (int r = 0; r < w; r++) memcpy(s->m[r]->recv, tmp + r * bytes, bytes);
		break;
	case KAlltoAll:
		for (int r = 0; r < w; r++) for (int i = 0; i < w; i++) memcpy(tmp + (r * w + i) * bytes, (const char *)s->m[i]->send + r * bytes, bytes);
		for (int r = 0; r < w; r++) memcpy(s->m[r]->recv, tmp + r * w * bytes, w * bytes);
		break;
	}
	free(tmp);
	for (int r = 0; r < w; r++) s->m[r]->done = 1;
}

static void postColl(struct member *m) {
	struct clique *cl = m->comm->cl;
	struct slot *s = slots;
	while (s && !(s->cl == cl && s->seq == m->seq)) s = s->next;
	if (!s) { s = calloc(1, sizeof *s); s->cl = cl; s->seq = m->seq; s->m = calloc(cl->nranks, sizeof *s->m); s->next = slots; slots = s; }
	s->m[m->comm->rank] = m;
	if (++s->n == cl->nranks) {
		runColl(s);
		for (struct slot **pp = &slots; *pp; pp = &(*pp)->next) if (*pp == s) { *pp = s->next; break; }
		free(s->m); free(s);
	}
}

static void postP2P(struct member *m) {
	int src = m->kind == KSend ? m->comm->rank : m->peer, dst = m->kind == KSend ? m->peer : m->comm->rank;
	for (int i = 0; i < nposted; i++) {
		struct member *o = posted[i];
		if (o->kind == m->kind || o->comm->cl != m->comm->cl) continue;
		int osrc = o->kind == KSend ? o->comm->rank : o->peer, odst = o->kind == KSend ? o->peer : o->comm->rank;
		if (osrc != src || odst != dst) continue;
		struct member *s = m->kind == KSend ? m : o, *r = m->kind == KSend ? o : m;
		size_t sb = s->count * dtsize[s->dt], rb = r->count * dtsize[r->dt];
		if (sb > rb) { fake_log("p2p truncation %zu > %zu", sb, rb); r->comm->async = InvalidUsage; }
		memcpy(r->recv, s->send, sb < rb ? sb : rb);
		s->done = r->done = 1;
		memmove(posted + i, posted + i + 1, (size_t)(nposted - i - 1) * sizeof *posted); /* keep FIFO order */
		nposted--;
		return;
	}
	if (nposted == capposted) { capposted = capposted ? 2 * capposted : 64; posted = realloc(posted, capposted * sizeof *posted); }
	posted[nposted++] = m;
}

/* A group launched on one stream: its members are posted when it reaches the stream's head. */
struct groupop { struct fake_op op; int n, isPosted; struct member *m[]; };
static int runGroup(struct fake_op *op) {
	struct groupop *g = (struct groupop *)op;
	if (!g->isPosted) {
		g->isPosted = 1;
		for (int i = 0; i < g->n; i++) {
			if (g->m[i]->comm->aborted) { g->m[i]->done = 1; continue; }
			if (g->m[i]->kind == KSend || g->m[i]->kind == KRecv) postP2P(g->m[i]); else postColl(g->m[i]);
		}
	}
	for (int i = 0; i < g->n; i++) if (!g->m[i]->done) return 0;
	for (int i = 0; i < g->n; i++) free(g->m[i]);
	return 1;
}

static __thread int depth;
static __thread struct { struct member *m; void *stream; } pend[256];
static __thread int npend;

int ncclGroupStart(void) { FAIL("ncclGroupStart"); depth++; fake_log("ncclGroupStart depth=%d", depth); return Success; }
int ncclGroupEnd(void) {
	FAIL("ncclGroupEnd");
	if (depth == 0) { seterr("ncclGroupEnd without ncclGroupStart"); return InvalidUsage; }
	fake_log("ncclGroupEnd depth=%d ops=%d", depth, npend);
	if (--depth > 0) return Success;
	fake_lock();
	int blocking = 1;
	for (int i = 0; i < npend; i++) {
		if (!pend[i].m) continue;
		void *st = pend[i].stream;
		int n = 0;
		for (int j = i; j < npend; j++) if (pend[j].m && pend[j].stream == st) n++;
		struct groupop *g = calloc(1, sizeof *g + n * sizeof(struct member *));
		g->op.try_run = runGroup;
		for (int j = i; j < npend; j++) if (pend[j].m && pend[j].stream == st) { g->m[g->n++] = pend[j].m; if (!pend[j].m->comm->blocking) blocking = 0; pend[j].m = 0; }
		fake_enqueue(st, &g->op);
	}
	npend = 0;
	fake_progress();
	fake_unlock();
	return blocking ? Success : Success; /* nonblocking launches finish synchronously in the fake */
}

static int enqueue(struct comm *c, int kind, const void *send, void *recv, size_t count, int dt, int op, int root, int peer, void *stream) {
	if (!c || c->aborted) { seterr("communicator aborted or NULL"); return InvalidArgument; }
	if (dt < 0 || dt >= (VERSION >= 22403 ? 12 : 10)) { seterr("invalid data type"); return InvalidArgument; }
	if (kind != KSend && kind != KRecv && kind != KBroadcast && kind != KAllGather && kind != KAlltoAll &&
		kind != KGather && kind != KScatter && (op < 0 || op > 4)) { seterr("invalid reduction operation"); return InvalidArgument; }
	if ((kind == KSend || kind == KRecv) && (peer < 0 || peer >= c->cl->nranks)) { seterr("invalid peer"); return InvalidArgument; }
	if ((kind == KBroadcast || kind == KReduce || kind == KGather || kind == KScatter) && (root < 0 || root >= c->cl->nranks)) { seterr("invalid root"); return InvalidArgument; }
	struct member *m = calloc(1, sizeof *m);
	m->kind = kind; m->comm = c; m->send = send; m->recv = recv; m->count = count; m->dt = dt; m->op = op; m->root = root; m->peer = peer;
	if (kind != KSend && kind != KRecv) m->seq = c->seq++;
	int implicit = depth == 0;
	if (implicit) depth++;
	pend[npend].m = m; pend[npend].stream = stream; npend++;
	return implicit ? ncclGroupEnd() : Success;
}

#define LOGC(name, ...) fake_log(name " dev=%d rank=%d " __VA_ARGS__)
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, struct comm *c, void *st) {
	FAIL("ncclAllReduce");
	LOGC("ncclAllReduce", "send=%p recv=%p count=%zu dt=%d op=%d stream=%p", fake_cur_dev(), c ? c->rank : -1, s, r, n, dt, op, st);
	return enqueue(c, KAllReduce, s, r, n, dt, op, -1, -1, st);
}
int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, struct comm *c, void *st) {
	FAIL("ncclBroadcast");
	LOGC("ncclBroadcast", "send=%p recv=%p count=%zu dt=%d root=%d", fake_cur_dev(), c ? c->rank : -1, s, r, n, dt, root);
	return enqueue(c, KBroadcast, s, r, n, dt, 0, root, -1, st);
}
int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root, struct comm *c, void *st) {
	FAIL("ncclReduce");
	LOGC("ncclReduce", "send=%p recv=%p count=%zu dt=%d op=%d root=%d", fake_cur_dev(), c ? c->rank : -1, s, r, n, dt, op, root);
	return enqueue(c, KReduce, s, r, n, dt, op, root, -1, st);
}
int ncclAllGather(const void *s, void *r, size_t n, int dt, struct comm *c, void *st) {
	FAIL("ncclAllGather");
	LOGC("ncclAllGather", "send=%p recv=%p count=%zu dt=%d", fake_cur_dev(), c ? c->rank : -1, s, r, n, dt);
	return enqueue(c, KAllGather, s, r, n, dt, 0, -1, -1, st);
}
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, struct comm *c, void *st) {
	FAIL("ncclReduceScatter");
	LOGC("ncclReduceScatter", "send=%p recv=%p count=%zu dt=%d op=%d", fake_cur_dev(), c ? c->rank : -1, s, r, n, dt, op);
	return enqueue(c, KReduceScatter, s, r, n, dt, op, -1, -1, st);
}
int ncclSend(const void *s, size_t n, int dt, int peer, struct comm *c, void *st) {
	FAIL("ncclSend");
	LOGC("ncclSend", "buf=%p count=%zu dt=%d peer=%d", fake_cur_dev(), c ? c->rank : -1, s, n, dt, peer);
	return enqueue(c, KSend, s, 0, n, dt, 0, -1, peer, st);
}
int ncclRecv(void *r, size_t n, int dt, int peer, struct comm *c, void *st) {
	FAIL("ncclRecv");
	LOGC("ncclRecv", "buf=%p count=%zu dt=%d peer=%d", fake_cur_dev(), c ? c->rank : -1, r, n, dt, peer);
	return enqueue(c, KRecv, 0, r, n, dt, 0, -1, peer, st);
}
#ifndef FAKE_OLD
int ncclAlltoAll(const void *s, void *r, size_t n, int dt, struct comm *c, void *st) {
	FAIL("ncclAlltoAll");
	LOGC("ncclAlltoAll", "send=%p recv=%p count=%zu dt=%d", fake_cur_dev(), c ? c->rank : -1, s, r, n, dt);
	return enqueue(c, KAlltoAll, s, r, n, dt, 0, -1, -1, st);
}
int ncclGather(const void *s, void *r, size_t n, int dt, int root, struct comm *c, void *st) {
	FAIL("ncclGather");
	LOGC("ncclGather", "send=%p recv=%p count=%zu dt=%d root=%d", fake_cur_dev(), c ? c->rank : -1, s, r, n, dt, root);
	return enqueue(c, KGather, s, r, n, dt, 0, root, -1, st);
}
int ncclScatter(const void *s, void *r, size_t n, int dt, int root, struct comm *c, void *st) {
	FAIL("ncclScatter");
	LOGC("ncclScatter", "send=%p recv=%p count=%zu dt=%d root=%d", fake_cur_dev(), c ? c->rank : -1, s, r, n, dt, root);
	return enqueue(c, KScatter, s, r, n, dt, 0, root, -1, st);
}
#endif
