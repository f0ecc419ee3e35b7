//go:build linux && cgo

// Package abicheck compares the libibverbs declarations in ../abi.h, which the verbs
// provider is built with, against the real <infiniband/verbs.h>: every struct size and
// field offset the provider relies on. It exists only for its test; where the header is
// missing (libibverbs-dev not installed) Fields reports that and the test skips.
package abicheck

/*
#cgo CFLAGS: -I${SRCDIR}/..
#include <stddef.h>
#include "abi.h"

#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define HAVE_VERBS 1
#define REAL_SIZE(t) sizeof(struct t)
#define REAL_OFF(t, f) offsetof(struct t, f)
#define REAL_USIZE(t) sizeof(union t)
#else
#define HAVE_VERBS 0
#define REAL_SIZE(t) 0
#define REAL_OFF(t, f) 0
#define REAL_USIZE(t) 0
#endif

typedef struct { const char *name; size_t ours, real; } field;

#define SZ(o, r) { "sizeof " #r, sizeof(struct o), REAL_SIZE(r) }
#define OFF(o, r, f) { #r "." #f, offsetof(struct o, f), REAL_OFF(r, f) }
#define OFF2(o, r, of, rf) { #r "." #rf, offsetof(struct o, of), REAL_OFF(r, rf) }

static const field fields[] = {
	{ "sizeof ibv_gid", sizeof(union gv_gid), REAL_USIZE(ibv_gid) },
	SZ(gv_sge, ibv_sge), OFF(gv_sge, ibv_sge, addr), OFF(gv_sge, ibv_sge, length), OFF(gv_sge, ibv_sge, lkey),
	SZ(gv_send_wr, ibv_send_wr), OFF(gv_send_wr, ibv_send_wr, wr_id), OFF(gv_send_wr, ibv_send_wr, next),
	OFF(gv_send_wr, ibv_send_wr, sg_list), OFF(gv_send_wr, ibv_send_wr, num_sge), OFF(gv_send_wr, ibv_send_wr, opcode),
	OFF(gv_send_wr, ibv_send_wr, send_flags), OFF(gv_send_wr, ibv_send_wr, imm_data),
	OFF2(gv_send_wr, ibv_send_wr, remote_addr, wr.rdma.remote_addr), OFF2(gv_send_wr, ibv_send_wr, rkey, wr.rdma.rkey),
	OFF2(gv_send_wr, ibv_send_wr, remote_srqn, qp_type.xrc.remote_srqn),
	SZ(gv_recv_wr, ibv_recv_wr), OFF(gv_recv_wr, ibv_recv_wr, wr_id), OFF(gv_recv_wr, ibv_recv_wr, next),
	OFF(gv_recv_wr, ibv_recv_wr, sg_list), OFF(gv_recv_wr, ibv_recv_wr, num_sge),
	SZ(gv_wc, ibv_wc), OFF(gv_wc, ibv_wc, wr_id), OFF(gv_wc, ibv_wc, status), OFF(gv_wc, ibv_wc, opcode),
	OFF(gv_wc, ibv_wc, vendor_err), OFF(gv_wc, ibv_wc, byte_len), OFF(gv_wc, ibv_wc, imm_data), OFF(gv_wc, ibv_wc, qp_num),
	OFF(gv_wc, ibv_wc, src_qp), OFF(gv_wc, ibv_wc, wc_flags), OFF(gv_wc, ibv_wc, pkey_index), OFF(gv_wc, ibv_wc, slid),
	OFF(gv_wc, ibv_wc, sl), OFF(gv_wc, ibv_wc, dlid_path_bits),
	SZ(gv_context_ops, ibv_context_ops), OFF(gv_context_ops, ibv_context_ops, poll_cq),
	OFF(gv_context_ops, ibv_context_ops, req_notify_cq), OFF(gv_context_ops, ibv_context_ops, post_send),
	OFF(gv_context_ops, ibv_context_ops, post_recv),
	SZ(gv_context, ibv_context), OFF(gv_context, ibv_context, device), OFF(gv_context, ibv_context, ops),
	OFF(gv_context, ibv_context, cmd_fd), OFF(gv_context, ibv_context, abi_compat),
	SZ(gv_pd, ibv_pd), OFF(gv_pd, ibv_pd, context),
	SZ(gv_mr, ibv_mr), OFF(gv_mr, ibv_mr, context), OFF(gv_mr, ibv_mr, pd), OFF(gv_mr, ibv_mr, addr),
	OFF(gv_mr, ibv_mr, length), OFF(gv_mr, ibv_mr, handle), OFF(gv_mr, ibv_mr, lkey), OFF(gv_mr, ibv_mr, rkey),
	OFF(gv_cq, ibv_cq, context),
	OFF(gv_qp, ibv_qp, context), OFF(gv_qp, ibv_qp, send_cq), OFF(gv_qp, ibv_qp, recv_cq), OFF(gv_qp, ibv_qp, handle),
	OFF(gv_qp, ibv_qp, qp_num), OFF(gv_qp, ibv_qp, state), OFF(gv_qp, ibv_qp, qp_type),
	SZ(gv_qp_cap, ibv_qp_cap), OFF(gv_qp_cap, ibv_qp_cap, max_send_wr), OFF(gv_qp_cap, ibv_qp_cap, max_recv_wr),
	OFF(gv_qp_cap, ibv_qp_cap, max_send_sge), OFF(gv_qp_cap, ibv_qp_cap, max_recv_sge), OFF(gv_qp_cap, ibv_qp_cap, max_inline_data),
	SZ(gv_qp_init_attr, ibv_qp_init_attr), OFF(gv_qp_init_attr, ibv_qp_init_attr, send_cq),
	OFF(gv_qp_init_attr, ibv_qp_init_attr, recv_cq), OFF(gv_qp_init_attr, ibv_qp_init_attr, srq),
	OFF(gv_qp_init_attr, ibv_qp_init_attr, cap), OFF(gv_qp_init_attr, ibv_qp_init_attr, qp_type),
	OFF(gv_qp_init_attr, ibv_qp_init_attr, sq_sig_all),
	SZ(gv_global_route, ibv_global_route), OFF(gv_global_route, ibv_global_route, dgid),
	OFF(gv_global_route, ibv_global_route, flow_label), OFF(gv_global_route, ibv_global_route, sgid_index),
	OFF(gv_global_route, ibv_global_route, hop_limit), OFF(gv_global_route, ibv_global_route, traffic_class),
	SZ(gv_ah_attr, ibv_ah_attr), OFF(gv_ah_attr, ibv_ah_attr, grh), OFF(gv_ah_attr, ibv_ah_attr, dlid),
	OFF(gv_ah_attr, ibv_ah_attr, sl), OFF(gv_ah_attr, ibv_ah_attr, src_path_bits), OFF(gv_ah_attr, ibv_ah_attr, static_rate),
	OFF(gv_ah_attr, ibv_ah_attr, is_global), OFF(gv_ah_attr, ibv_ah_attr, port_num),
	SZ(gv_qp_attr, ibv_qp_attr), OFF(gv_qp_attr, ibv_qp_attr, qp_state), OFF(gv_qp_attr, ibv_qp_attr, path_mtu),
	OFF(gv_qp_attr, ibv_qp_attr, qkey), OFF(gv_qp_attr, ibv_qp_attr, rq_psn), OFF(gv_qp_attr, ibv_qp_attr, sq_psn),
	OFF(gv_qp_attr, ibv_qp_attr, dest_qp_num), OFF(gv_qp_attr, ibv_qp_attr, qp_access_flags), OFF(gv_qp_attr, ibv_qp_attr, cap),
	OFF(gv_qp_attr, ibv_qp_attr, ah_attr), OFF(gv_qp_attr, ibv_qp_attr, alt_ah_attr), OFF(gv_qp_attr, ibv_qp_attr, pkey_index),
	OFF(gv_qp_attr, ibv_qp_attr, max_rd_atomic), OFF(gv_qp_attr, ibv_qp_attr, max_dest_rd_atomic),
	OFF(gv_qp_attr, ibv_qp_attr, min_rnr_timer), OFF(gv_qp_attr, ibv_qp_attr, port_num), OFF(gv_qp_attr, ibv_qp_attr, timeout),
	OFF(gv_qp_attr, ibv_qp_attr, retry_cnt), OFF(gv_qp_attr, ibv_qp_attr, rnr_retry), OFF(gv_qp_attr, ibv_qp_attr, rate_limit),
	SZ(gv_port_attr, ibv_port_attr), OFF(gv_port_attr, ibv_port_attr, state), OFF(gv_port_attr, ibv_port_attr, active_mtu),
	OFF(gv_port_attr, ibv_port_attr, gid_tbl_len), OFF(gv_port_attr, ibv_port_attr, lid), OFF(gv_port_attr, ibv_port_attr, link_layer),
	OFF(gv_port_attr, ibv_port_attr, port_cap_flags2),
	SZ(gv_device_attr, ibv_device_attr), OFF(gv_device_attr, ibv_device_attr, phys_port_cnt),
};

static int have_verbs(void) { return HAVE_VERBS; }
static int nfields(void) { return sizeof(fields) / sizeof(fields[0]); }
static const field *field_at(int i) { return &fields[i]; }

#if HAVE_VERBS
// The enum values abi.h copies.
static const long enums[][2] = {
	{ GV_QPT_RC, IBV_QPT_RC }, { GV_QPS_INIT, IBV_QPS_INIT }, { GV_QPS_RTR, IBV_QPS_RTR }, { GV_QPS_RTS, IBV_QPS_RTS },
	{ GV_PORT_ACTIVE, IBV_PORT_ACTIVE }, { GV_LINK_LAYER_INFINIBAND, IBV_LINK_LAYER_INFINIBAND },
	{ GV_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_ETHERNET }, { GV_SEND_SIGNALED, IBV_SEND_SIGNALED },
	{ GV_WC_WITH_IMM, IBV_WC_WITH_IMM }, { GV_ACCESS_LOCAL_WRITE, IBV_ACCESS_LOCAL_WRITE },
	{ GV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE },
	{ GV_MASK_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS },
	{ GV_MASK_RTR, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER },
	{ GV_MASK_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC },
	// rc's numbers, which the engine passes straight through.
	{ 0, IBV_WR_RDMA_WRITE }, { 1, IBV_WR_RDMA_WRITE_WITH_IMM }, { 1, IBV_WC_RDMA_WRITE }, { 129, IBV_WC_RECV_RDMA_WITH_IMM },
	{ 12, IBV_WC_RETRY_EXC_ERR }, { 10, IBV_WC_REM_ACCESS_ERR }, { 5, IBV_WC_WR_FLUSH_ERR },
};
static int nconsts(void) { return sizeof(enums) / sizeof(enums[0]); }
static long const_at(int i, int j) { return enums[i][j]; }
#else
static int nconsts(void) { return 0; }
static long const_at(int i, int j) { return 0; }
#endif
*/
import "C"

// Field is one size or offset: as abi.h declares it and as verbs.h has it.
type Field struct {
	Name       string
	Ours, Real int
}

// Fields returns every checked size and offset; have is false without the header.
func Fields() (have bool, fields []Field) {
	for i := 0; i < int(C.nfields()); i++ {
		f := C.field_at(C.int(i))
		fields = append(fields, Field{Name: C.GoString(f.name), Ours: int(f.ours), Real: int(f.real)})
	}
	return C.have_verbs() == 1, fields
}

// Enums returns (abi.h value, verbs.h value) pairs for the constants the provider copies.
func Enums() [][2]int64 {
	var out [][2]int64
	for i := 0; i < int(C.nconsts()); i++ {
		out = append(out, [2]int64{int64(C.const_at(C.int(i), 0)), int64(C.const_at(C.int(i), 1))})
	}
	return out
}
