// The subset of libibverbs' ABI (rdma-core, x86-64 LP64) that goccl uses, declared here
// so the default build needs no rdma-core headers. abicheck compiles these declarations
// next to the real <infiniband/verbs.h> and compares every size and offset below.
#ifndef GOCCL_VERBS_ABI_H
#define GOCCL_VERBS_ABI_H

#include <stdint.h>
#include <stddef.h>
#include <pthread.h>

struct gv_device;
struct gv_context;
struct gv_cq;
struct gv_qp;

union gv_gid {
	uint8_t raw[16];
	struct { uint64_t subnet_prefix, interface_id; } global; // big endian
};

struct gv_sge { uint64_t addr; uint32_t length; uint32_t lkey; };

// ibv_send_wr with its unions flattened to the RDMA member goccl uses; the tail unions
// are kept as opaque bytes so the size matches.
struct gv_send_wr {
	uint64_t wr_id;
	struct gv_send_wr *next;
	struct gv_sge *sg_list;
	int num_sge;
	int opcode;              // enum ibv_wr_opcode
	unsigned int send_flags;
	uint32_t imm_data;       // network byte order
	uint64_t remote_addr;    // wr.rdma
	uint32_t rkey;
	uint8_t wr_pad[20];      // rest of the 32-byte wr union
	uint32_t remote_srqn;    // qp_type.xrc
	uint8_t tail[52];        // bind_mw / tso union
};

struct gv_recv_wr { uint64_t wr_id; struct gv_recv_wr *next; struct gv_sge *sg_list; int num_sge; };

struct gv_wc {
	uint64_t wr_id;
	int status;              // enum ibv_wc_status
	int opcode;              // enum ibv_wc_opcode
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data;       // network byte order
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned int wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
};

// ibv_context_ops: only the three hot-path slots are named; the rest are padding.
struct gv_context_ops {
	void *pad0[11];
	int (*poll_cq)(struct gv_cq *cq, int num_entries, struct gv_wc *wc);
	int (*req_notify_cq)(struct gv_cq *cq, int solicited_only);
	void *pad1[12];
	int (*post_send)(struct gv_qp *qp, struct gv_send_wr *wr, struct gv_send_wr **bad_wr);
	int (*post_recv)(struct gv_qp *qp, struct gv_recv_wr *wr, struct gv_recv_wr **bad_wr);
	void *pad2[5];
};

struct gv_context {
	struct gv_device *device;
	struct gv_context_ops ops;
	int cmd_fd;
	int async_fd;
	int num_comp_vectors;
	pthread_mutex_t mutex;
	void *abi_compat;
};

struct gv_pd { struct gv_context *context; uint32_t handle; };

struct gv_mr {
	struct gv_context *context;
	struct gv_pd *pd;
	void *addr;
	size_t length;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
};

struct gv_cq { struct gv_context *context; /* ... */ };

struct gv_qp {
	struct gv_context *context;
	void *qp_context;
	struct gv_pd *pd;
	struct gv_cq *send_cq;
	struct gv_cq *recv_cq;
	void *srq;
	uint32_t handle;
	uint32_t qp_num;
	int state;
	int qp_type;
	/* mutex, cond, events_completed follow */
};

struct gv_qp_cap {
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
};

struct gv_qp_init_attr {
	void *qp_context;
	struct gv_cq *send_cq;
	struct gv_cq *recv_cq;
	void *srq;
	struct gv_qp_cap cap;
	int qp_type;
	int sq_sig_all;
};

struct gv_global_route {
	union gv_gid dgid;
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
};

struct gv_ah_attr {
	struct gv_global_route grh;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t is_global;
	uint8_t port_num;
};

struct gv_qp_attr {
	int qp_state;
	int cur_qp_state;
	int path_mtu;
	int path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	unsigned int qp_access_flags;
	struct gv_qp_cap cap;
	struct gv_ah_attr ah_attr;
	struct gv_ah_attr alt_ah_attr;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint32_t rate_limit;
};

struct gv_port_attr {
	int state;
	int max_mtu;
	int active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
	uint16_t port_cap_flags2;
};

// ibv_device_attr: goccl reads only phys_port_cnt; the rest is opaque.
struct gv_device_attr {
	uint8_t opaque[227];
	uint8_t phys_port_cnt;
	uint8_t pad[4];
};

// Values from verbs.h.
enum {
	GV_QPT_RC = 2,
	GV_QPS_INIT = 1, GV_QPS_RTR = 2, GV_QPS_RTS = 3,
	GV_PORT_ACTIVE = 4,
	GV_LINK_LAYER_INFINIBAND = 1, GV_LINK_LAYER_ETHERNET = 2,
	GV_SEND_SIGNALED = 2,
	GV_WC_WITH_IMM = 2,
	GV_ACCESS_LOCAL_WRITE = 1, GV_ACCESS_REMOTE_WRITE = 2,
	// attribute masks for RESET->INIT, INIT->RTR, RTR->RTS (NCCL net_ib connect.cc)
	GV_MASK_INIT = 0x39, GV_MASK_RTR = 0x129181, GV_MASK_RTS = 0x12E01,
};

#endif
