package goccl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/goccl/goccl/internal/trace"
	"github.com/goccl/goccl/transport"
)

// Comm is a communicator: a fixed group of ranks linked pairwise, running collectives
// in the order they are issued (like a CUDA stream). Methods are safe for concurrent
// use; operations from several goroutines run one at a time in issue order.
//
// After any collective fails (a peer died, ranks disagreed, a deadline passed) the
// communicator is unusable, as with NCCL: every later call returns the first error.
// Close it and create a new one.
type Comm struct {
	cfg       Config
	rank      int
	size      int
	localRank int
	host      string
	id        string
	log       *slog.Logger

	store   transport.Store // scoped to this communicator
	closers []io.Closer     // what Close releases, in order: links, endpoints, store

	eps       map[string]transport.Endpoint
	links     []transport.Conn // by rank; nil at our own rank
	linkNames []string         // transport name per rank ("self" at our own)
	peers     []peerRecord
	offload   transport.Offloader // non-nil when every link goes through one offloading endpoint

	sel atomic.Pointer[selector]

	linkStates  []linkState            // per peer: blocked-since times and byte counters
	tracer      *trace.Recorder        // nil unless GOCCL_TRACE is set
	flight      flight                 // the last operations, for "who is stuck"
	counters    counters               // Stats
	lastBlocked atomic.Pointer[string] // the link a timed-out operation was waiting on

	queue     []*Work       // issued and not yet started, oldest first from qhead; guarded by mu
	qhead     int           // queue[:qhead] have been taken (nil); guarded by mu
	queued    atomic.Int64  // len(queue), read without mu
	wake      chan struct{} // kicks loop: something is queued
	quit      chan struct{}
	loopDone  chan struct{}
	watchStop chan struct{} // closed by Close once no operation runs: the watchdog returns
	watchDone chan struct{}
	seq       uint64              // operations issued so far; touched only under execMu
	sendSeq   []uint64            // point-to-point messages sent to each peer
	recvSeq   []uint64            // and received from it
	p2p       p2pHelper           // runs SendRecv's receives beside their sends (p2p.go); under execMu
	batch     batchScratch        // what BatchSendRecv and AllToAllV reuse from call to call (batch.go); under execMu
	lanes     laneWorkers         // and the goroutines that run their lanes beside the caller
	batchHome descHome[batchCall] // blocking BatchSendRecvs' descriptions, reused (reuse.go)
	a2avHome  descHome[allToAllV] // and AllToAllVs'
	splitSeq  atomic.Uint64
	shareSeq  atomic.Uint64 // AllocShared calls so far

	execMu    sync.Mutex      // held while an operation runs (on the loop or a caller's goroutine)
	inline    Work            // the Work of a blocking call run on the caller's goroutine; under execMu
	op        opCtx           // the context operations run under (opctx.go)
	opStop    func() bool     // disarms the AfterFunc on opArmed; under execMu
	opArmed   context.Context // the caller context opStop's callback watches; under execMu
	opUser    context.Context // the running operation's caller context; under mu, like the four below and op's replacement
	opCancel  context.CancelCauseFunc
	opRunning bool
	opGen     uint64
	opStarted int64       // monoNow
	prog      progressRec // the collective started last, for the watchdog

	scratch  opScratch   // per-operation state reused under execMu
	traceLog bool        // the logger passes LevelTrace (its level is the config's, fixed at Init)
	exchIn   []byte      // the inputs of a small AllReduce run as one exchange (exchange), under execMu
	small    smallPick   // what the last small AllReduce resolved to (exchange), under execMu
	barrier  barrierPick // what a Barrier resolved to (fastBarrier), under execMu
	pairs    [7]pairPick // what the last call of each kind fastPair and fastOneWay take resolved to, under execMu
	opSince  int64       // the running operation's start in monoNow's units; set under execMu before it runs

	localEager   int         // the smallest eager size this rank's links promise (transport.Eager)
	eager        int         // the smallest over every rank, agreed at Init; what algorithms see
	chunk        int         // the pipelining unit (Config.ChunkBytes, or agreed at Init; 0 = the algorithms' default)
	shared       sharedMem   // AllocShared memory; guarded by execMu
	staging      stagingArea // algos/staged's area; guarded by execMu
	stageable    bool        // every rank can have a staging area (agreed at Init)
	streams      bool        // every rank's shm links stream their payloads (shm.Options.Streams; agreed at Init)
	streamAuto   bool        // shm.stream_stores is auto: the communicator times both ways (streamtune.go)
	streamTune   streamTuner // which way the shm links copy, per size, by timing (streamtune.go); under execMu
	algoTune     algoTuner   // auto's online choice of the AllReduce algorithm (algotune.go); under execMu
	stagedMin    int         // shm.staged_min: the smallest AllReduce that tries staged; -1 off
	stagedMax    int         // shm.staged_max: the largest (math.MaxInt: no bound)
	stagedSet    bool        // shm.staged_min or shm.staged_max came from the config, not a default
	stagingBytes int         // shm.staging_bytes: each rank's part of the area
	directMin    int         // shm.direct_min: the smallest collective that tries direct on shared memory; -1 off
	shmDir       string      // shm.dir, where AllocShared puts its windows

	// mu guards the queue, the sticky error and closed, and the state of the running
	// operation (opUser..prog above, the flight recorder and the counters): one lock, so
	// that a blocking call takes it twice, once as it starts and once as it ends (a
	// two-rank small AllReduce once, fastpath.go). It is taken through lock, which
	// first records a fast call's pending end.
	mu       sync.Mutex
	err      error // sticky failure
	closed   bool
	unusable atomic.Bool // err != nil || closed, read without mu (fastpath.go)

	fast fastPath // the two-rank small AllReduce's path (fastpath.go)
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// LocalRank is the rank's position on its host (-1 when unknown).
func (c *Comm) LocalRank() int { return c.localRank }

// Host is this rank's host identity.
func (c *Comm) Host() string { return c.host }

// ID is the communicator's id, unique within its store.
func (c *Comm) ID() string { return c.id }

// EagerBytes is the message size every rank's links take without a running receive
// (transport.Eager), agreed at Init: algorithms send steps up to it from the calling
// goroutine.
func (c *Comm) EagerBytes() int { return c.eager }

// Config is the effective configuration.
func (c *Comm) Config() Config { return c.cfg }

// TransportOf names the transport of the link to peer ("self" for this rank).
func (c *Comm) TransportOf(peer int) string {
	if peer < 0 || peer >= c.size {
		return ""
	}
	return c.linkNames[peer]
}

// PeerHost is the host identity of peer, as it announced it at Init.
func (c *Comm) PeerHost(peer int) string {
	if peer < 0 || peer >= c.size {
		return ""
	}
	return c.peers[peer].Host
}

// PeerPid is the process id of peer.
func (c *Comm) PeerPid(peer int) int {
	if peer < 0 || peer >= c.size {
		return 0
	}
	return c.peers[peer].Pid
}

// Err returns the error that made the communicator unusable, or nil.
func (c *Comm) Err() error {
	c.lock()
	defer c.mu.Unlock()
	return c.err
}

// fail records the first fatal error.
func (c *Comm) fail(err error) error {
	c.lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		c.unusable.Store(true)
	}
	return c.err
}

// Abort makes every pending and later call fail: the running operation is cancelled and
// every link is closed, so peers blocked on this rank see an error too.
func (c *Comm) Abort(reason error) {
	if reason == nil {
		reason = errors.New("aborted")
	}
	c.fail(fmt.Errorf("goccl: rank %d: communicator aborted: %w: %w", c.rank, transport.ErrClosed, reason))
	c.cancelOp(reason)
	for _, l := range c.links {
		if l != nil {
			l.Close()
		}
	}
}

// Close waits for queued operations to finish, then releases every link, endpoint and
// the store. Later calls return ErrClosed.
func (c *Comm) Close() error {
	c.lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.unusable.Store(true)
	c.mu.Unlock()
	close(c.quit)
	<-c.loopDone
	c.execMu.Lock() // an operation running inline on a caller's goroutine finishes first
	c.p2p.stop()
	c.lanes.stop()
	c.execMu.Unlock()
	// The watchdog runs until nothing does: it is what ends an operation that outlives
	// its deadline, and Close waits for the operations.
	close(c.watchStop)
	<-c.watchDone
	c.fail(fmt.Errorf("goccl: rank %d: %w: communicator closed", c.rank, transport.ErrClosed))
	c.disarm()                      // nothing runs any more: no caller context keeps us alive
	c.cancelOp(transport.ErrClosed) // releases what the transports registered on it
	unregisterLive(c)
	serr := errors.Join(c.closeShared(), c.closeStaging())
	var terr error
	if c.tracer != nil {
		terr = c.tracer.Flush()
	}
	return errors.Join(c.release(), serr, terr)
}

func (c *Comm) release() error {
	var errs []error
	for i := len(c.closers) - 1; i >= 0; i-- {
		if err := c.closers[i].Close(); err != nil && !errors.Is(err, transport.ErrClosed) {
			errs = append(errs, err)
		}
	}
	c.closers = nil
	return errors.Join(errs...)
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
