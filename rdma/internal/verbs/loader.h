// dlopen/dlvsym table and C trampolines for libibverbs (Go cannot call C function
// pointers). Exported functions are resolved with dlvsym(..., "IBVERBS_1.1") as NCCL's
// ibvsymbols.cc does; the static-inline hot path (post_send, post_recv, poll_cq) goes
// through the context's ops table exactly as verbs.h's inline functions do.
#ifndef GOCCL_VERBS_LOADER_H
#define GOCCL_VERBS_LOADER_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE // dlvsym
#endif
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <arpa/inet.h>
#include "abi.h"

struct gv_fns {
	struct gv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct gv_device **);
	const char *(*get_device_name)(struct gv_device *);
	struct gv_context *(*open_device)(struct gv_device *);
	int (*close_device)(struct gv_context *);
	int (*query_device)(struct gv_context *, struct gv_device_attr *);
	int (*query_port)(struct gv_context *, uint8_t, struct gv_port_attr *);
	int (*query_gid)(struct gv_context *, uint8_t, int, union gv_gid *);
	struct gv_pd *(*alloc_pd)(struct gv_context *);
	int (*dealloc_pd)(struct gv_pd *);
	struct gv_mr *(*reg_mr)(struct gv_pd *, void *, size_t, int);
	int (*dereg_mr)(struct gv_mr *);
	struct gv_cq *(*create_cq)(struct gv_context *, int, void *, void *, int);
	int (*destroy_cq)(struct gv_cq *);
	struct gv_qp *(*create_qp)(struct gv_pd *, struct gv_qp_init_attr *);
	int (*modify_qp)(struct gv_qp *, struct gv_qp_attr *, int);
	int (*destroy_qp)(struct gv_qp *);
	const char *(*wc_status_str)(int);
};

static struct gv_fns gv;

static const char *gv_names[] = {
	"ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name", "ibv_open_device",
	"ibv_close_device", "ibv_query_device", "ibv_query_port", "ibv_query_gid", "ibv_alloc_pd",
	"ibv_dealloc_pd", "ibv_reg_mr", "ibv_dereg_mr", "ibv_create_cq", "ibv_destroy_cq",
	"ibv_create_qp", "ibv_modify_qp", "ibv_destroy_qp", "ibv_wc_status_str",
};

// gv_open dlopens name; on failure it returns NULL and *err is dlerror()'s text.
static void *gv_open(const char *name, const char **err) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) *err = dlerror();
	return h;
}

// gv_resolve fills the table; it returns the name of the first missing symbol or NULL.
static const char *gv_resolve(void *h) {
	void **slots = (void **)&gv;
	for (size_t i = 0; i < sizeof(gv_names) / sizeof(gv_names[0]); i++) {
		void *p = dlvsym(h, gv_names[i], "IBVERBS_1.1");
		if (!p) return gv_names[i];
		slots[i] = p;
	}
	return NULL;
}

static struct gv_device **gv_get_device_list(int *n) { errno = 0; return gv.get_device_list(n); }
static void gv_free_device_list(struct gv_device **l) { gv.free_device_list(l); }
static struct gv_device *gv_device_at(struct gv_device **l, int i) { return l[i]; }
static const char *gv_device_name(struct gv_device *d) { return gv.get_device_name(d); }
static struct gv_context *gv_open_device(struct gv_device *d) { errno = 0; return gv.open_device(d); }
static int gv_close_device(struct gv_context *c) { return gv.close_device(c); }
static int gv_query_device(struct gv_context *c, struct gv_device_attr *a) { return gv.query_device(c, a); }
static int gv_query_port(struct gv_context *c, int port, struct gv_port_attr *a) {
	memset(a, 0, sizeof(*a)); // the exported symbol fills the shorter compat struct
	return gv.query_port(c, (uint8_t)port, a);
}
static int gv_query_gid(struct gv_context *c, int port, int idx, union gv_gid *g) { return gv.query_gid(c, (uint8_t)port, idx, g); }
static struct gv_pd *gv_alloc_pd(struct gv_context *c) { errno = 0; return gv.alloc_pd(c); }
static int gv_dealloc_pd(struct gv_pd *p) { return gv.dealloc_pd(p); }
static struct gv_mr *gv_reg_mr(struct gv_pd *p, uintptr_t addr, size_t n, int access) {
	errno = 0;
	return gv.reg_mr(p, (void *)addr, n, access);
}
static int gv_dereg_mr(struct gv_mr *m) { return gv.dereg_mr(m); }
static struct gv_cq *gv_create_cq(struct gv_context *c, int depth) { errno = 0; return gv.create_cq(c, depth, NULL, NULL, 0); }
static int gv_destroy_cq(struct gv_cq *cq) { return gv.destroy_cq(cq); }
static struct gv_qp *gv_create_qp(struct gv_pd *p, struct gv_cq *cq, int sdepth, int rdepth) {
	struct gv_qp_init_attr a;
	memset(&a, 0, sizeof(a));
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = GV_QPT_RC;
	a.cap.max_send_wr = sdepth;
	a.cap.max_recv_wr = rdepth;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	errno = 0;
	return gv.create_qp(p, &a);
}
static int gv_destroy_qp(struct gv_qp *q) { return gv.destroy_qp(q); }
static uint32_t gv_qp_num(struct gv_qp *q) { return q->qp_num; }
static const char *gv_wc_status_str(int s) { return gv.wc_status_str(s); }

// RESET->INIT (mask 0x39): pkey 0, the port, remote write access.
static int gv_qp_init(struct gv_qp *q, int port) {
	struct gv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = GV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = (uint8_t)port;
	a.qp_access_flags = GV_ACCESS_REMOTE_WRITE;
	return gv.modify_qp(q, &a, GV_MASK_INIT);
}

// INIT->RTR (mask 0x129181) then RTR->RTS (mask 0x12E01) with NCCL's timeouts.
static int gv_qp_connect(struct gv_qp *q, int port, int mtu, uint32_t dest_qpn, uint32_t rq_psn,
		uint32_t sq_psn, int global, uint16_t dlid, const uint8_t *dgid, int sgid_index,
		int timeout, int retry, int rnr_retry, int min_rnr) {
	struct gv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = GV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = (uint8_t)min_rnr;
	a.ah_attr.port_num = (uint8_t)port;
	if (global) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)sgid_index;
		a.ah_attr.grh.hop_limit = 255;
	} else {
		a.ah_attr.dlid = dlid;
	}
	int rc = gv.modify_qp(q, &a, GV_MASK_RTR);
	if (rc) return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = GV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = (uint8_t)timeout;
	a.retry_cnt = (uint8_t)retry;
	a.rnr_retry = (uint8_t)rnr_retry;
	a.max_rd_atomic = 1;
	return gv.modify_qp(q, &a, GV_MASK_RTS);
}

// ibv_post_send for one RDMA write; len 0 posts no SGE. imm is in host order.
static int gv_post_write(struct gv_qp *q, uint64_t id, int opcode, uint64_t laddr, uint32_t len,
		uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm, int signaled) {
	struct gv_sge sge = { laddr, len, lkey };
	struct gv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = opcode;
	wr.send_flags = signaled ? GV_SEND_SIGNALED : 0;
	wr.imm_data = htonl(imm);
	wr.remote_addr = raddr;
	wr.rkey = rkey;
	return q->context->ops.post_send(q, &wr, &bad);
}

// ibv_post_recv of n zero-SGE receives (a WRITE WITH IMM needs no receive buffer).
static int gv_post_recv(struct gv_qp *q, uint64_t id, int n) {
	for (int i = 0; i < n; i++) {
		struct gv_recv_wr wr = { id, NULL, NULL, 0 }, *bad = NULL;
		int rc = q->context->ops.post_recv(q, &wr, &bad);
		if (rc) return rc;
	}
	return 0;
}

// ibv_poll_cq; immediates come back in host order.
static int gv_poll_cq(struct gv_cq *cq, int n, struct gv_wc *wc) {
	int got = cq->context->ops.poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++)
		if (wc[i].wc_flags & GV_WC_WITH_IMM) wc[i].imm_data = ntohl(wc[i].imm_data);
	return got;
}
#endif
