//go:build linux && cgo

package nccl

/*
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } goccl_uid;   // ncclUniqueId
typedef struct {                                     // ncclConfig_t, 2.18 prefix (48 bytes)
	size_t size; unsigned int magic, version;
	int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char* netName;
	int splitShare, trafficClass;
} goccl_config;

#define SETDEV_FAILED 0x40000000

static int t_int(uintptr_t f, int* out) { return ((int(*)(int*))f)(out); }
static int t_uid(uintptr_t f, char* out) { return ((int(*)(goccl_uid*))f)((goccl_uid*)out); }

// t_init selects dev and creates the communicator in one C call: NCCL binds a comm to
// the calling thread's current device. uid is copied into a by-value ncclUniqueId.
static int t_init(uintptr_t setdev, int dev, uintptr_t initConfig, uintptr_t initRank, uintptr_t* comm,
		int nranks, const char* uid, int rank, goccl_config* cfg) {
	int r = ((int(*)(int))setdev)(dev);
	if (r) return r | SETDEV_FAILED;
	goccl_uid id; memcpy(&id, uid, sizeof id);
	void* c = 0;
	if (initConfig && cfg)
		r = ((int(*)(void**, int, goccl_uid, int, goccl_config*))initConfig)(&c, nranks, id, rank, cfg);
	else
		r = ((int(*)(void**, int, goccl_uid, int))initRank)(&c, nranks, id, rank);
	*comm = (uintptr_t)c;
	return r;
}
static int t_comm(uintptr_t f, uintptr_t comm) { return ((int(*)(void*))f)((void*)comm); }
static int t_comm_int(uintptr_t f, uintptr_t comm, int* out) { return ((int(*)(void*, int*))f)((void*)comm, out); }
static const char* t_errstr(uintptr_t f, int code) { return ((const char*(*)(int))f)(code); }
static const char* t_lasterr(uintptr_t f, uintptr_t comm) { return ((const char*(*)(void*))f)((void*)comm); }

enum { OP_SEND = 1, OP_RECV, OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE, OP_ALLGATHER, OP_REDUCESCATTER,
	OP_ALLTOALL, OP_GATHER, OP_SCATTER };

// goccl_op is one NCCL call of a group; fn is the entry point for kind.
typedef struct {
	int kind, dt, op, root; // root doubles as the peer of send/recv
	uintptr_t fn, send, recv, comm, stream;
	size_t count;
} goccl_op;

static int call_op(const goccl_op* o) {
	void *s = (void*)o->send, *r = (void*)o->recv, *c = (void*)o->comm, *st = (void*)o->stream;
	switch (o->kind) {
	case OP_SEND: return ((int(*)(const void*, size_t, int, int, void*, void*))o->fn)(s, o->count, o->dt, o->root, c, st);
	case OP_RECV: return ((int(*)(void*, size_t, int, int, void*, void*))o->fn)(r, o->count, o->dt, o->root, c, st);
	case OP_ALLREDUCE: case OP_REDUCESCATTER:
		return ((int(*)(const void*, void*, size_t, int, int, void*, void*))o->fn)(s, r, o->count, o->dt, o->op, c, st);
	case OP_REDUCE:
		return ((int(*)(const void*, void*, size_t, int, int, int, void*, void*))o->fn)(s, r, o->count, o->dt, o->op, o->root, c, st);
	case OP_BROADCAST: case OP_GATHER: case OP_SCATTER:
		return ((int(*)(const void*, void*, size_t, int, int, void*, void*))o->fn)(s, r, o->count, o->dt, o->root, c, st);
	case OP_ALLGATHER: case OP_ALLTOALL:
		return ((int(*)(const void*, void*, size_t, int, void*, void*))o->fn)(s, r, o->count, o->dt, c, st);
	}
	return 4; // ncclInvalidArgument
}

// t_group issues ops inside one ncclGroupStart/End on this OS thread (NCCL's group
// state is thread-local). On a failing op it still ends the group, so the thread's
// group depth is never left raised, and reports the op's index in *failed.
static int t_group(uintptr_t start, uintptr_t end, const goccl_op* ops, int n, int* failed) {
	*failed = -1;
	int r = ((int(*)(void))start)();
	if (r) return r;
	int first = 0;
	for (int i = 0; i < n && !first; i++) {
		first = call_op(&ops[i]);
		if (first) *failed = i;
	}
	int e = ((int(*)(void))end)();
	return first ? first : e;
}
*/
import "C"

import (
	"unsafe"

	"github.com/goccl/goccl/internal/dl"
)

func loadLib(s dl.Spec) (*dl.Lib, nfns, error) {
	var f nfns
	lib, err := dl.Open(s)
	if err != nil {
		return nil, f, err
	}
	req := map[string]*uintptr{
		"ncclGetVersion": &f.getVersion, "ncclGetUniqueId": &f.getUniqueID, "ncclCommInitRank": &f.initRank,
		"ncclCommDestroy": &f.destroy, "ncclCommAbort": &f.abort, "ncclCommGetAsyncError": &f.asyncError,
		"ncclGetErrorString": &f.errString, "ncclCommCount": &f.count, "ncclCommUserRank": &f.userRank,
		"ncclCommCuDevice": &f.cuDevice, "ncclGroupStart": &f.groupStart, "ncclGroupEnd": &f.groupEnd,
		"ncclAllReduce": &f.allReduce, "ncclBroadcast": &f.broadcast, "ncclReduce": &f.reduce,
		"ncclAllGather": &f.allGather, "ncclReduceScatter": &f.reduceScatter, "ncclSend": &f.send, "ncclRecv": &f.recv,
	}
	opt := map[string]*uintptr{
		"ncclCommInitRankConfig": &f.initRankConfig, "ncclGetLastError": &f.lastError, "ncclCommFinalize": &f.finalize,
		"ncclAlltoAll": &f.allToAll, "ncclGather": &f.gather, "ncclScatter": &f.scatter,
	}
	if err := lib.Syms(req, opt); err != nil {
		return nil, f, err
	}
	return lib, f, nil
}

func (l *Lib) cVersion() (int, Result) {
	var v C.int
	r := C.t_int(C.uintptr_t(l.f.getVersion), &v)
	return int(v), Result(r)
}

func (l *Lib) cUniqueID() (UniqueID, Result) {
	var id UniqueID
	r := C.t_uid(C.uintptr_t(l.f.getUniqueID), (*C.char)(unsafe.Pointer(&id[0])))
	return id, Result(r)
}

// cInit returns the comm handle (set even when nonblocking init is still in progress),
// the result, and whether the failure was cudaSetDevice's.
func (l *Lib) cInit(setDev uintptr, dev, nranks int, id UniqueID, rank int, cfg *Config) (uintptr, Result, bool) {
	var comm C.uintptr_t
	var cc *C.goccl_config
	if cfg != nil && l.f.initRankConfig != 0 {
		cc = (*C.goccl_config)(C.calloc(1, C.sizeof_goccl_config))
		defer C.free(unsafe.Pointer(cc))
		cc.size = configSize
		cc.magic = configMagic
		cc.version = C.uint(configLayout)
		cc.blocking = C.int(cfg.Blocking)
		cc.cgaClusterSize = C.int(cfg.CGAClusterSize)
		cc.minCTAs = C.int(cfg.MinCTAs)
		cc.maxCTAs = C.int(cfg.MaxCTAs)
		cc.splitShare = C.int(cfg.SplitShare)
		cc.trafficClass = C.int(Undef)
		if cfg.NetName != "" {
			cc.netName = C.CString(cfg.NetName)
			defer C.free(unsafe.Pointer(cc.netName))
		}
	}
	r := int(C.t_init(C.uintptr_t(setDev), C.int(dev), C.uintptr_t(l.f.initRankConfig), C.uintptr_t(l.f.initRank),
		&comm, C.int(nranks), (*C.char)(unsafe.Pointer(&id[0])), C.int(rank), cc))
	if r&setDevFailed != 0 {
		return 0, Result(r &^ setDevFailed), true
	}
	return uintptr(comm), Result(r), false
}

func (l *Lib) cComm(fn, comm uintptr) Result {
	return Result(C.t_comm(C.uintptr_t(fn), C.uintptr_t(comm)))
}

func (l *Lib) cCommInt(fn, comm uintptr) (int, Result) {
	var v C.int
	r := C.t_comm_int(C.uintptr_t(fn), C.uintptr_t(comm), &v)
	return int(v), Result(r)
}

func (l *Lib) cErrString(code Result) string {
	if p := C.t_errstr(C.uintptr_t(l.f.errString), C.int(code)); p != nil {
		return C.GoString(p)
	}
	return ""
}

func (l *Lib) cLastError(comm uintptr) string {
	if l.f.lastError == 0 {
		return ""
	}
	if p := C.t_lasterr(C.uintptr_t(l.f.lastError), C.uintptr_t(comm)); p != nil {
		return C.GoString(p)
	}
	return ""
}

// cGroup runs ops in one group; it returns the result and the index of the failing op
// (-1 when the group call itself failed or nothing did).
func (l *Lib) cGroup(ops []groupOp) (Result, int) {
	if len(ops) == 0 {
		return Success, -1
	}
	cops := make([]C.goccl_op, len(ops))
	for i, o := range ops {
		cops[i] = C.goccl_op{kind: C.int(o.kind), dt: C.int(o.dt), op: C.int(o.op), root: C.int(o.root),
			fn: C.uintptr_t(l.fnFor(o.kind)), send: C.uintptr_t(o.send), recv: C.uintptr_t(o.recv),
			comm: C.uintptr_t(o.comm), stream: C.uintptr_t(o.stream), count: C.size_t(o.count)}
	}
	var failed C.int
	r := C.t_group(C.uintptr_t(l.f.groupStart), C.uintptr_t(l.f.groupEnd), &cops[0], C.int(len(cops)), &failed)
	return Result(r), int(failed)
}
