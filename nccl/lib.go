package nccl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/transport"
)

// nfns holds NCCL's entry points; optional ones (newer than NCCL 2.7) may be 0.
type nfns struct {
	getVersion, getUniqueID, initRank, initRankConfig, destroy, abort, finalize uintptr
	asyncError, errString, lastError, count, userRank, cuDevice                 uintptr
	groupStart, groupEnd, allReduce, broadcast, reduce, allGather               uintptr
	reduceScatter, send, recv, allToAll, gather, scatter                        uintptr
}

const setDevFailed = 0x40000000

// Group op kinds, numbered as the C side's OP_* enum.
const (
	opSend = iota + 1
	opRecv
	opAllReduce
	opBroadcast
	opReduce
	opAllGather
	opReduceScatter
	opAllToAll
	opGather
	opScatter
)

// Lib is a loaded libnccl.
type Lib struct {
	lib     *dl.Lib
	f       nfns
	version int
}

var (
	libMu  sync.Mutex
	libs   = map[string]*Lib{}
	libErr = map[string]error{}
)

// LibrarySpec describes where LoadLibrary looks for libnccl.so.2: path (from Params
// "nccl.lib") when set, else the system library path, the pip wheel directory
// nvidia/nccl/lib (cu12 and cu13 wheels both use it), $CONDA_PREFIX/lib and
// /usr/local/cuda/lib64.
func LibrarySpec(path string) dl.Spec {
	s := dl.Spec{Name: "NCCL (libnccl.so.2)", Path: path, PathFrom: "nccl.lib",
		Sonames: []string{"libnccl.so.2", "libnccl.so"}, WheelDirs: []string{"nvidia/nccl/lib"},
		ExtraDirs: []string{"/usr/local/cuda/lib64"}}
	if cp := os.Getenv("CONDA_PREFIX"); cp != "" {
		s.ExtraDirs = append([]string{cp + "/lib"}, s.ExtraDirs...)
	}
	return s
}

// LoadLibrary opens libnccl (see LibrarySpec) and checks that it is at least NCCL 2.7
// (point-to-point). Errors wrap transport.ErrNotSupported and say what was searched.
func LoadLibrary(path string) (*Lib, error) {
	libMu.Lock()
	defer libMu.Unlock()
	if l, ok := libs[path]; ok {
		return l, nil
	}
	if err, ok := libErr[path]; ok {
		return nil, err
	}
	l, err := loadLibrary(path)
	if err != nil {
		libErr[path] = err
		return nil, err
	}
	libs[path] = l
	return l, nil
}

func loadLibrary(path string) (*Lib, error) {
	lib, f, err := loadLib(LibrarySpec(path))
	if err != nil {
		return nil, fmt.Errorf("nccl: %w", err)
	}
	l := &Lib{lib: lib, f: f}
	runtime.LockOSThread() // the failing call and its ncclGetLastError on one thread (err)
	v, r := l.cVersion()
	if r != Success {
		err := l.err("ncclGetVersion", r, 0)
		runtime.UnlockOSThread()
		return nil, err
	}
	runtime.UnlockOSThread()
	if v < minVersion {
		return nil, fmt.Errorf("nccl: %w: %s is NCCL %s; goccl needs >= %s (ncclSend/ncclRecv)",
			transport.ErrNotSupported, lib.Path(), VersionString(v), VersionString(minVersion))
	}
	l.version = v
	return l, nil
}

// Version is the loaded library's version code (23007 for 2.30.7).
func (l *Lib) Version() int { return l.version }

// Path is the file the library was loaded from.
func (l *Lib) Path() string { return l.lib.Path() }

// HasConfig reports whether ncclCommInitRankConfig (2.14+) is available.
func (l *Lib) HasConfig() bool { return l.f.initRankConfig != 0 }

// UniqueID creates a new ncclUniqueId (rank 0 does this and shares it).
func (l *Lib) UniqueID() (UniqueID, error) {
	runtime.LockOSThread() // see err
	defer runtime.UnlockOSThread()
	id, r := l.cUniqueID()
	return id, l.err("ncclGetUniqueId", r, 0)
}

// err is the error for result r of call, with ncclGetLastError's detail. NCCL keeps
// that detail per OS thread, so err must run on the thread that made the failing call:
// its callers lock the goroutine to its thread from the call to here (a goroutine that
// moved in between read another thread's detail, or none).
func (l *Lib) err(call string, r Result, comm uintptr) error {
	if r == Success {
		return nil
	}
	return l.errWith(call, r, l.cLastError(comm))
}

// errWith is err with the detail already read (on the calling thread) as last.
func (l *Lib) errWith(call string, r Result, last string) error {
	if r == Success {
		return nil
	}
	return &Error{Call: call, Code: r, Text: l.cErrString(r), Last: last}
}

func (l *Lib) fnFor(kind int) uintptr {
	switch kind {
	case opSend:
		return l.f.send
	case opRecv:
		return l.f.recv
	case opAllReduce:
		return l.f.allReduce
	case opBroadcast:
		return l.f.broadcast
	case opReduce:
		return l.f.reduce
	case opAllGather:
		return l.f.allGather
	case opReduceScatter:
		return l.f.reduceScatter
	case opAllToAll:
		return l.f.allToAll
	case opGather:
		return l.f.gather
	case opScatter:
		return l.f.scatter
	}
	return 0
}

var opNames = map[int]string{opSend: "ncclSend", opRecv: "ncclRecv", opAllReduce: "ncclAllReduce",
	opBroadcast: "ncclBroadcast", opReduce: "ncclReduce", opAllGather: "ncclAllGather",
	opReduceScatter: "ncclReduceScatter", opAllToAll: "ncclAlltoAll", opGather: "ncclGather", opScatter: "ncclScatter"}

// groupOp is one call of a group; comm and stream are filled in by comm.run.
type groupOp struct {
	kind, dt, op, root int // root is the peer for send/recv
	send, recv         uintptr
	sref, rref         int // 1-based index of a staged host region send/recv are offsets into
	count              int
	comm, stream       uintptr
}

// comm is one NCCL communicator with its own non-blocking stream. Calls on it are
// serialized by mu (an NCCL communicator is not thread-safe); abort may come from any
// goroutine and interrupts a wait within a millisecond.
type comm struct {
	l          *Lib
	h          uintptr
	dev        cuda.Device
	rank, size int
	stream     *cuda.Stream
	blocking   bool

	mu        sync.Mutex
	dead      error         // set once aborted or failed; every later call returns it
	abortReq  chan struct{} // closed by abort to stop a wait
	abortOnce sync.Once
}

// newComm creates a communicator on dev (ncclCommInitRankConfig when the library has
// it, else ncclCommInitRank). Nonblocking init (the default) is polled so ctx bounds it.
func (l *Lib) newComm(ctx context.Context, dev cuda.Device, size, rank int, id UniqueID, cfg Config) (*comm, error) {
	rt := dev.Runtime()
	var cp *Config
	if l.HasConfig() {
		cp = &cfg
	}
	type initResult struct {
		h      uintptr
		r      Result
		sdFail bool
		last   string // ncclGetLastError on the init's own thread, when it failed
	}
	done := make(chan initResult, 1)
	go func() {
		runtime.LockOSThread() // see err
		defer runtime.UnlockOSThread()
		res := initResult{}
		res.h, res.r, res.sdFail = l.cInit(rt.SetDeviceFunc(), dev.Ordinal(), size, id, rank, cp)
		if res.r != Success && res.r != InProgress && !res.sdFail {
			res.last = l.cLastError(res.h)
		}
		done <- res
	}()
	var res initResult
	select {
	case res = <-done:
	case <-ctx.Done():
		// A blocking ncclCommInitRank cannot be interrupted: let it finish in the
		// background (NCCL bounds it with its own bootstrap timeout) and abort it then.
		go func() {
			if res := <-done; res.h != 0 {
				l.cComm(l.f.abort, res.h)
			}
		}()
		return nil, fmt.Errorf("nccl: rank %d of %d on device %d: init: %w", rank, size, dev.Ordinal(), ctxErr(ctx))
	}
	h, r := res.h, res.r
	if res.sdFail {
		return nil, &cuda.Error{Call: "cudaSetDevice before ncclCommInitRank", Device: dev.Ordinal(), Code: int(r)}
	}
	call := "ncclCommInitRank"
	if cp != nil {
		call = "ncclCommInitRankConfig"
	}
	c := &comm{l: l, h: h, dev: dev, rank: rank, size: size, abortReq: make(chan struct{}),
		blocking: cp == nil || cfg.Blocking != 0}
	last := res.last
	if r == InProgress {
		runtime.LockOSThread() // see err
		r = c.settle(ctx)
		if r != Success {
			last = l.cLastError(h)
		}
		runtime.UnlockOSThread()
	}
	if r != Success {
		var err error = l.errWith(call, r, last)
		if r == InProgress { // ctx ended while NCCL was still connecting
			err = fmt.Errorf("nccl: %s did not finish: %w", call, ctxErr(ctx))
		}
		if h != 0 {
			l.cComm(l.f.abort, h)
		}
		return nil, fmt.Errorf("nccl: rank %d of %d on device %d: %w", rank, size, dev.Ordinal(), err)
	}
	s, err := dev.NewStream()
	if err != nil {
		l.cComm(l.f.abort, h)
		return nil, fmt.Errorf("nccl: stream for rank %d: %w", rank, err)
	}
	c.stream = s
	return c, nil
}

// settle polls ncclCommGetAsyncError until the nonblocking call finishes, ctx ends or
// abort is requested. It returns the final result (InternalError-free codes from NCCL,
// or Timeout/InvalidUsage stand-ins are never invented: ctx ends become errors upstream).
func (c *comm) settle(ctx context.Context) Result {
	res := InProgress
	_ = cuda.Poll(ctx, func() (bool, error) {
		select {
		case <-c.abortReq:
			return false, errAborted
		default:
		}
		st, r := c.l.cCommInt(c.l.f.asyncError, c.h)
		if r != Success {
			res = r
			return true, nil
		}
		res = Result(st)
		return res != InProgress, nil
	})
	return res
}

var errAborted = errors.New("communicator aborted")

// run issues ops as one group on this comm's stream and waits for them, polling the
// stream and ncclCommGetAsyncError. When ctx ends first the communicator is aborted
// (NCCL cannot cancel a single operation) and every later call fails.
func (c *comm) run(ctx context.Context, what string, ops []groupOp) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	runtime.LockOSThread() // the group, its settling and the errors' details on one thread (see err)
	defer runtime.UnlockOSThread()
	if c.dead != nil {
		return c.dead
	}
	for i := range ops {
		ops[i].comm, ops[i].stream = c.h, c.stream.Handle()
	}
	r, failed := c.l.cGroup(ops)
	if r == InProgress {
		r = c.settle(ctx)
	}
	if r != Success {
		call := "ncclGroupEnd"
		if failed >= 0 {
			call = opNames[ops[failed].kind]
		}
		err := c.l.err(call, r, c.h)
		if r != InvalidArgument && r != InvalidUsage {
			c.dead = err // a system or remote error leaves the comm unusable
		}
		if r == InProgress { // ctx ended while NCCL was still launching
			err = c.failLocked(ctx, what)
		}
		return err
	}
	err := cuda.Poll(ctx, func() (bool, error) {
		select {
		case <-c.abortReq:
			return false, errAborted
		default:
		}
		st, r := c.l.cCommInt(c.l.f.asyncError, c.h)
		if r == Success && st != int(Success) && Result(st) != InProgress {
			return false, c.l.err("ncclCommGetAsyncError", Result(st), c.h)
		}
		return c.stream.Query()
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, errAborted) {
		return fmt.Errorf("nccl: %s: %w", what, transport.ErrClosed)
	}
	var ne *Error
	if errors.As(err, &ne) {
		c.dead = err
		c.abortLocked()
		return fmt.Errorf("nccl: %s: %w", what, err)
	}
	return c.failLocked(ctx, what)
}

// failLocked aborts after ctx ended during an operation.
func (c *comm) failLocked(ctx context.Context, what string) error {
	err := fmt.Errorf("nccl: %s did not finish: %w; communicator aborted", what, ctxErr(ctx))
	c.dead = err
	c.abortLocked()
	return err
}

func (c *comm) abortLocked() {
	c.abortOnce.Do(func() {
		close(c.abortReq)
		c.l.cComm(c.l.f.abort, c.h)
	})
}

// abort stops any wait on the comm and aborts it. It waits up to a second for an
// in-flight call to notice; NCCL allows ncclCommAbort from another thread, so after
// that it aborts anyway.
func (c *comm) abort(reason error) {
	select {
	case <-c.abortReq:
		return
	default:
	}
	deadline := time.Now().Add(time.Second)
	c.abortOnce.Do(func() { close(c.abortReq) })
	locked := false
	for time.Now().Before(deadline) {
		if locked = c.mu.TryLock(); locked {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	if c.dead == nil {
		c.dead = reason
	}
	c.l.cComm(c.l.f.abort, c.h)
	if locked {
		c.mu.Unlock()
	}
}

// close releases the communicator: finalize and destroy when it is healthy and
// nonblocking (bounded by timeout), abort otherwise, so Close never hangs on a dead peer.
func (c *comm) close(timeout time.Duration) {
	c.mu.Lock()
	select {
	case <-c.abortReq:
		c.mu.Unlock()
		return
	default:
	}
	healthy := c.dead == nil
	c.dead = fmt.Errorf("nccl: communicator closed: %w", transport.ErrClosed)
	if healthy && !c.blocking && c.l.f.finalize != 0 {
		r := c.l.cComm(c.l.f.finalize, c.h)
		if r == InProgress || r == Success {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			r = c.settle(ctx)
			cancel()
		}
		if r == Success {
			c.abortOnce.Do(func() { close(c.abortReq) })
			c.l.cComm(c.l.f.destroy, c.h)
			c.mu.Unlock()
			_ = c.stream.Destroy()
			return
		}
	}
	c.abortLocked()
	c.mu.Unlock()
	if c.stream != nil {
		_ = c.stream.Destroy()
	}
}

func ctxErr(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	return fmt.Errorf("%w: %w", transport.ErrClosed, ctx.Err())
}
