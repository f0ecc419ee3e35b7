// Package rc is the seam between goccl's RDMA protocol engine and the providers that
// move bytes for it: a small, verbs-shaped model of reliable-connected queue pairs.
//
// The engine (package rdma) only uses what is here: memory it allocated through a
// Device, memory regions, completion queues and RC queue pairs that post RDMA WRITE and
// RDMA WRITE WITH IMMEDIATE and zero-SGE receives. Two providers implement it:
// rdma/internal/verbs (libibverbs through dlopen) and rdma/internal/soft (a software
// emulation between processes on one host). Numbers (opcodes, statuses, access flags)
// follow libibverbs so a verbs provider passes them through unchanged.
package rc

import (
	"fmt"
	"time"
)

// Access is a memory region's permission set (ibv_access_flags).
type Access uint32

// Access flags with libibverbs' values.
const (
	AccessLocalWrite  Access = 1
	AccessRemoteWrite Access = 2
	AccessRemoteRead  Access = 4
)

// Opcode is a send work request's operation (ibv_wr_opcode).
type Opcode uint32

// The two operations the engine posts.
const (
	OpWrite    Opcode = 0 // IBV_WR_RDMA_WRITE
	OpWriteImm Opcode = 1 // IBV_WR_RDMA_WRITE_WITH_IMM
)

// WCOpcode is a completion's operation (ibv_wc_opcode).
type WCOpcode uint32

// Completion opcodes the engine sees.
const (
	WCWrite       WCOpcode = 1   // IBV_WC_RDMA_WRITE: a local write finished
	WCRecvImm     WCOpcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM: a peer's write with immediate landed
	WCUnsupported WCOpcode = 0xffffffff
)

// Status is a completion's status (ibv_wc_status).
type Status uint32

// The statuses with libibverbs' values (those a provider here can produce plus the
// common hardware ones, so their names print).
const (
	StatusSuccess       Status = 0
	StatusLocLenErr     Status = 1
	StatusLocQPOpErr    Status = 2
	StatusLocProtErr    Status = 4
	StatusWRFlushErr    Status = 5
	StatusBadRespErr    Status = 7
	StatusLocAccessErr  Status = 8
	StatusRemInvReqErr  Status = 9
	StatusRemAccessErr  Status = 10
	StatusRemOpErr      Status = 11
	StatusRetryExcErr   Status = 12
	StatusRNRRetryExc   Status = 13
	StatusRemAbortErr   Status = 16
	StatusFatalErr      Status = 19
	StatusRespTimeout   Status = 20
	StatusGeneralErr    Status = 21
	statusNamesBoundary        = 24
)

// statusNames are ibv_wc_status_str's strings (rdma-core 44, libibverbs/verbs.c).
var statusNames = [statusNamesBoundary]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error",
	"remote access error", "remote operation error", "transport retry counter exceeded",
	"RNR retry counter exceeded", "local RDD violation error", "remote invalid RD request",
	"aborted error", "invalid EE context number", "invalid EE context state", "fatal error",
	"response timeout error", "general error", "TM error", "TM software rendezvous",
}

// String is ibv_wc_status_str's text plus the number, e.g. "transport retry counter exceeded (12)".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return fmt.Sprintf("%s (%d)", statusNames[s], uint32(s))
	}
	return fmt.Sprintf("unknown status (%d)", uint32(s))
}

// SendWR is one send work request: an RDMA write of Len bytes from Local (at Offset)
// to RemoteAddr under RKey, with an immediate for OpWriteImm. Len 0 posts no SGE.
type SendWR struct {
	ID         uint64
	Op         Opcode
	Local      MR
	Offset     int
	Len        int
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32 // host order; providers convert to the wire's big endian
	Signaled   bool
}

// Completion is one work completion (the fields of ibv_wc the engine reads).
type Completion struct {
	ID        uint64
	Status    Status
	Opcode    WCOpcode
	Len       uint32 // byte_len: bytes written by the peer for WCRecvImm
	Imm       uint32 // host order
	QPNum     uint32
	VendorErr uint32
}

// PortInfo describes the device port a provider opened.
type PortInfo struct {
	Device    string   // "mlx5_0", "soft0"
	Port      int      // from 1
	LinkLayer string   // "InfiniBand", "Ethernet", "Software"
	LID       uint16   // InfiniBand local id
	GID       [16]byte // the GID at GIDIndex (RoCE)
	GIDIndex  int
	MTU       uint8 // ibv_mtu enum (1 = 256 ... 5 = 4096)
}

// Addr is what one QP needs to know about its remote QP: the fields NCCL exchanges
// (QP number, LID, GID, PSN, MTU) plus provider-specific bytes.
type Addr struct {
	QPN   uint32
	PSN   uint32
	LID   uint16
	GID   [16]byte
	MTU   uint8
	Extra []byte
}

// Memory is page-aligned memory a Device allocated for registration; it is never
// Go heap memory, because the hardware (or a peer process) writes it asynchronously.
type Memory interface {
	Bytes() []byte
	Free() error
}

// MR is a registered memory region.
type MR interface {
	Addr() uint64 // the address peers name in RDMA writes (the mapping's base)
	Len() int
	LKey() uint32
	RKey() uint32
	Close() error
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(out) completions into out and returns how many.
	Poll(out []Completion) (int, error)
	// Wait blocks until a completion may be ready, Wake is called, or d passes.
	Wait(d time.Duration)
	// Wake makes a concurrent Wait return.
	Wake()
	Close() error
}

// QP is a reliable-connected queue pair whose send and receive completions go to the
// CQ it was created with.
type QP interface {
	Num() uint32
	// Addr is what the remote QP's Connect needs.
	Addr() Addr
	// Connect moves the QP to RTS (INIT→RTR→RTS) towards remote.
	Connect(remote Addr) error
	PostSend(wrs []SendWR) error
	// PostRecv posts n zero-SGE receives (WRITE WITH IMM consumes one each) with the given id.
	PostRecv(id uint64, n int) error
	Close() error
}

// Device is an opened device port with a protection domain.
type Device interface {
	Port() PortInfo
	Alloc(n int) (Memory, error)
	Register(m Memory, access Access) (MR, error)
	NewCQ(depth int) (CQ, error)
	// NewQP creates an RC QP with room for sendDepth and recvDepth outstanding requests.
	NewQP(cq CQ, sendDepth, recvDepth int) (QP, error)
	Close() error
}

// The RC settings NCCL uses (net_ib connect.cc), applied by every provider that can.
const (
	Timeout    = 20 // 4.096 us * 2^20 ≈ 4.3 s per try
	RetryCount = 7
	RNRRetry   = 7 // 7 = retry forever
	MinRNRTime = 12
	PKeyIndex  = 0
)
