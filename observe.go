package goccl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname

	"github.com/goccl/goccl/internal/relstore"
	"github.com/goccl/goccl/internal/trace"
	"github.com/goccl/goccl/transport"
)

// linkState is what the flight recorder knows about one link right now.
type linkState struct {
	// When the operation of a blocked Send (Recv) began, in monoNow's units; 0 when none is
	// blocked. The operation's start, not the message's, so that a message costs no clock
	// read: for "who is stuck" it is which link that matters.
	// Written with relstore (no fence: two per message), read with sync/atomic.
	sendSince int64
	recvSince int64
	sent      atomic.Uint64 // bytes
	received  atomic.Uint64
	// And those of fast calls (fastpath.go), kept under mu where the call's books are:
	// a plain add in place of a locked one.
	fastSent, fastReceived uint64
}

// obsConn wraps every link: it keeps the flight recorder's "waiting on peer X" state and
// byte counters, and records per-message spans when tracing is on.
type obsConn struct {
	transport.Conn
	c      *Comm
	peer   int
	state  *linkState
	try    transport.TrySender // the link's TrySend, if it has one
	resOp  int64               // an open reservation's operation start (Reserve to Commit)
	resN   int                 // and its length
	resTag uint32              // and its tag, for the trace
	resAt  time.Time           // when it was reserved, for the trace (only when tracing)
}

// obsStreamConn is obsConn for links that implement transport.Streamer.
type obsStreamConn struct {
	*obsConn
	s transport.Streamer
}

func (c *Comm) observe(peer int, l transport.Conn) transport.Conn {
	o := &obsConn{Conn: l, c: c, peer: peer, state: &c.linkStates[peer]}
	o.try, _ = l.(transport.TrySender)
	if s, ok := l.(transport.Streamer); ok {
		return &obsStreamConn{obsConn: o, s: s}
	}
	return o
}

// unwrapConn is the transport's own link under what observe wrapped it in.
func unwrapConn(l transport.Conn) transport.Conn {
	switch o := l.(type) {
	case *obsConn:
		return o.Conn
	case *obsStreamConn:
		return o.Conn
	}
	return l
}

// monoEpoch anchors monoNow and clockNow; epochNano is the runtime's monotonic clock at
// that moment.
var monoEpoch, epochNano = time.Now(), nanotime()

// nanotime is the Go runtime's monotonic clock, the one time.Since reads, without
// time.Since's arithmetic on a Time (the runtime keeps this link for packages outside
// the standard library).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// monoNow is a monotonic clock in nanoseconds since monoEpoch (never 0): one read of the
// monotonic clock, where time.Now takes two, wall and monotonic, about 70 ns on the
// development VM.
func monoNow() int64 { return nanotime() - epochNano + 1 }

// monoTime is the time.Time of t in monoNow's units (the zero Time for 0): the wall time
// is the process start's plus the monotonic time since, so it does not follow
// wall-clock steps made while the process runs (fine for the flight recorder and
// traces, which order and time events). Operations keep their times as monoNow's
// integers and convert only when someone reads them: time.Time arithmetic was a
// twentieth of a small collective's instructions.
func monoTime(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return monoEpoch.Add(time.Duration(t - 1))
}

// monoUnix is t in monoNow's units as Unix nanoseconds.
func monoUnix(t int64) int64 { return epochUnix + t - 1 }

var epochUnix = monoEpoch.UnixNano()

// Trace track ids: 0 holds the collectives, 1000+p sends to peer p, 2000+p receives.
const (
	tidColl = 0
	tidSend = 1000
	tidRecv = 2000
)

func (o *obsConn) Send(ctx context.Context, h transport.Header, p []byte) error {
	if o.c.tracer != nil {
		return o.traced(tidSend, "send", len(p), h.Tag, func() error { return o.send(ctx, h, p) })
	}
	return o.send(ctx, h, p)
}

func (o *obsConn) Recv(ctx context.Context, want transport.Header, buf []byte) error {
	if o.c.tracer != nil {
		return o.traced(tidRecv, "recv", len(buf), want.Tag, func() error { return o.recv(ctx, want, buf) })
	}
	return o.recv(ctx, want, buf)
}

// RecvCold passes transport.ColdReceiver through, observed as Recv is; a link without
// it receives by Recv.
func (o *obsConn) RecvCold(ctx context.Context, want transport.Header, buf []byte) error {
	cr, ok := o.Conn.(transport.ColdReceiver)
	if !ok {
		return o.Recv(ctx, want, buf)
	}
	if o.c.tracer != nil {
		return o.traced(tidRecv, "recv", len(buf), want.Tag, func() error { return o.recvCold(ctx, cr, want, buf) })
	}
	return o.recvCold(ctx, cr, want, buf)
}

// send is Send without the trace span: it marks the link blocked for the flight
// recorder (with the operation's start: a message costs no clock read, and for "who is
// stuck" it is the link that matters), counts the bytes, and names the peer in a
// timeout. (No closure and no time.Time per message: BENCHMARKS.md, "Speed", 14.)
func (o *obsConn) send(ctx context.Context, h transport.Header, p []byte) error {
	op := o.mark(&o.state.sendSince)
	return o.settle(o.Conn.Send(ctx, h, p), &o.state.sendSince, &o.state.sent, len(p), "send to", op)
}

// recv is Recv without the trace span (see send).
func (o *obsConn) recv(ctx context.Context, want transport.Header, buf []byte) error {
	op := o.mark(&o.state.recvSince)
	return o.settle(o.Conn.Recv(ctx, want, buf), &o.state.recvSince, &o.state.received, len(buf), "receive from", op)
}

// recvCold is RecvCold without the trace span (see send).
func (o *obsConn) recvCold(ctx context.Context, cr transport.ColdReceiver, want transport.Header, buf []byte) error {
	op := o.mark(&o.state.recvSince)
	return o.settle(cr.RecvCold(ctx, want, buf), &o.state.recvSince, &o.state.received, len(buf), "receive from", op)
}

// mark records that a transfer of the running operation is under way on since, and
// returns that operation's start.
func (o *obsConn) mark(since *int64) int64 {
	op := o.c.opSince
	relstore.Int64(since, op)
	return op
}

// settle ends the transfer mark began: it clears the mark, counts n bytes, and names the
// peer if err is a timeout (what the rank was doing: "send to", "receive from").
func (o *obsConn) settle(err error, since *int64, bytes *atomic.Uint64, n int, what string, op int64) error {
	relstore.Int64(since, 0)
	bytes.Add(uint64(n))
	if err != nil {
		return o.blocked(err, what, op)
	}
	return nil
}

// traced runs one transfer of n bytes (fn) and records it as a span on the link's track
// (tid plus the peer); only for a communicator that traces.
func (o *obsConn) traced(tid int, span string, n int, tag uint32, fn func() error) error {
	start := time.Now()
	err := fn()
	o.c.tracer.Span(tid+o.peer, "link", span, start, time.Since(start), map[string]any{"peer": o.peer, "bytes": n, "tag": tag})
	return err
}

// blocked says, in a timeout, which peer this rank was waiting for and for how long
// (the answer to "who is stuck"); the flight recorder keeps it too.
func (o *obsConn) blocked(err error, what string, since int64) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, transport.ErrTimeout) {
		return err
	}
	waited := time.Duration(monoNow() - since).Round(time.Millisecond)
	msg := fmt.Sprintf("rank %d (host %s, %s, %s) after %v", o.peer, o.c.PeerHost(o.peer), strings.TrimSuffix(what, " to"),
		o.c.linkNames[o.peer], waited)
	o.c.lastBlocked.Store(&msg)
	return fmt.Errorf("timed out waiting to %s rank %d (host %s) for %v: %w", what, o.peer, o.c.PeerHost(o.peer), waited, err)
}

// ReserveMax passes transport.Reserver through: 0 when the link lacks it, which tells
// callers not to reserve.
func (o *obsConn) ReserveMax() int {
	if r, ok := o.Conn.(transport.Reserver); ok {
		return r.ReserveMax()
	}
	return 0
}

// Reserve passes transport.Reserver through, observed as a Send from Reserve to Commit
// (a rank stuck waiting for room is "waiting to send to" its peer).
func (o *obsConn) Reserve(ctx context.Context, h transport.Header, n int) ([]byte, []byte, error) {
	r, ok := o.Conn.(transport.Reserver)
	if !ok {
		return nil, nil, fmt.Errorf("goccl: reserve on the %s: %w", o.Describe(), transport.ErrNotSupported)
	}
	op := o.mark(&o.state.sendSince)
	first, second, err := r.Reserve(ctx, h, n)
	if err != nil {
		return nil, nil, o.settle(err, &o.state.sendSince, &o.state.sent, 0, "send to", op)
	}
	o.resOp, o.resN, o.resTag = op, n, h.Tag
	if o.c.tracer != nil {
		o.resAt = time.Now()
	}
	return first, second, nil
}

// Advance passes transport.Reserver through.
func (o *obsConn) Advance(k int) {
	if r, ok := o.Conn.(transport.Reserver); ok {
		r.Advance(k)
	}
}

// Commit passes transport.Reserver through; a traced communicator records the message
// as a send span from Reserve to Commit.
func (o *obsConn) Commit(ctx context.Context) error {
	r, ok := o.Conn.(transport.Reserver)
	if !ok {
		return fmt.Errorf("goccl: commit on the %s: %w", o.Describe(), transport.ErrNotSupported)
	}
	err := o.settle(r.Commit(ctx), &o.state.sendSince, &o.state.sent, o.resN, "send to", o.resOp)
	if o.c.tracer != nil {
		o.c.tracer.Span(tidSend+o.peer, "link", "send (in place)", o.resAt, time.Since(o.resAt),
			map[string]any{"peer": o.peer, "bytes": o.resN, "tag": o.resTag})
	}
	return err
}

// Abort passes transport.Reserver through.
func (o *obsConn) Abort() {
	if r, ok := o.Conn.(transport.Reserver); ok {
		r.Abort()
	}
	relstore.Int64(&o.state.sendSince, 0)
}

// Describe passes the link's own description through.
func (o *obsConn) Describe() string {
	if d, ok := o.Conn.(transport.Describer); ok {
		return d.Describe()
	}
	return fmt.Sprintf("%s link to rank %d", o.c.linkNames[o.peer], o.peer)
}

func (o *obsStreamConn) RecvStream(ctx context.Context, want transport.Header, n int, fn func(off int, p []byte) error) error {
	if o.c.tracer != nil {
		return o.traced(tidRecv, "recv+reduce", n, want.Tag, func() error { return o.recvStream(ctx, want, n, fn) })
	}
	return o.recvStream(ctx, want, n, fn)
}

// recvStream is RecvStream without the trace span (see obsConn.send).
func (o *obsStreamConn) recvStream(ctx context.Context, want transport.Header, n int, fn func(off int, p []byte) error) error {
	op := o.mark(&o.state.recvSince)
	return o.settle(o.s.RecvStream(ctx, want, n, fn), &o.state.recvSince, &o.state.received, n, "receive from", op)
}

// OpState is where an operation is in its life.
type OpState string

// The states an operation goes through.
const (
	OpQueued  OpState = "queued"
	OpRunning OpState = "running"
	OpDone    OpState = "done"
	OpFailed  OpState = "failed"
)

// OpRecord is the flight recorder's entry for one operation.
type OpRecord struct {
	Seq      uint64    // the communicator's sequence number (point-to-point calls count too)
	Op       string    // "allreduce float32 sum count=1024"
	Algo     string    // algorithm that ran it
	State    OpState   // queued, running, done, failed
	Queued   time.Time // when it was issued
	Started  time.Time // zero while queued
	Finished time.Time // zero until done or failed
	Err      string    // the error, for failed operations
	Waiting  []string  // while running: "rank 2 (recv, 1.2s)" for every link it is blocked on
}

// flightRecords is how many operations each communicator remembers.
const flightRecords = 64

// flight is the flight recorder's ring of records; the communicator's mu guards it.
type flight struct {
	ops [flightRecords]opRec
	n   uint64 // records written so far; a Work keeps the number of its own
}

// opRec is what the flight recorder keeps of an operation: an OpRecord without what
// FlightRecord formats when read, times in monoNow's units (0: not yet).
type opRec struct {
	seq                       uint64
	state                     OpState
	queued, started, finished int64
	algo, err                 string
	desc                      fmt.Stringer
	fp                        transport.Fingerprint // a collective's or SendRecv's, when desc is nil
	to, from                  int                   // a SendRecv's peers
}

// queued records w, which runs op, as issued at now (and, with running, as started at
// the same time: a blocking call on an idle communicator).
func (f *flight) queued(w *Work, op *opSpec, now int64, running bool) {
	f.n++
	w.rec = f.n
	r := &f.ops[(f.n-1)%flightRecords]
	if d, ok := r.desc.(released); ok {
		d.release() // the overwritten record lets its description go (descHome)
	}
	r.seq, r.state, r.queued, r.started, r.finished = f.n, OpQueued, now, 0, 0
	r.algo, r.err, r.desc, r.fp, r.to, r.from = "", "", op.ext, op.fp, op.coll.to, op.coll.from
	if running {
		r.state, r.started = OpRunning, now
	}
}

// record returns operation n's record, or nil once newer ones have overwritten it.
func (f *flight) record(n uint64) *opRec {
	if n == 0 || f.n-n >= flightRecords {
		return nil
	}
	return &f.ops[(n-1)%flightRecords]
}

func (f *flight) started(n uint64, t int64) {
	if r := f.record(n); r != nil {
		r.state, r.started = OpRunning, t
	}
}

// end records the end of operation n at t, run by algo ("" when it did not run).
func (f *flight) end(n uint64, t int64, algo string, err error) {
	if r := f.record(n); r != nil {
		r.state, r.finished, r.algo = OpDone, t, algo
		if err != nil {
			r.state, r.err = OpFailed, err.Error()
		}
	}
}

// FlightRecord returns the last operations (oldest first), with what each running one
// is waiting for, like PyTorch's flight recorder.
func (c *Comm) FlightRecord() []OpRecord {
	f := &c.flight
	c.lock()
	defer c.mu.Unlock()
	var out []OpRecord
	start := uint64(0)
	if f.n > flightRecords {
		start = f.n - flightRecords
	}
	for i := start; i < f.n; i++ {
		in := &f.ops[i%flightRecords]
		r := OpRecord{Seq: in.seq, Algo: in.algo, State: in.state, Err: in.err,
			Queued: monoTime(in.queued), Started: monoTime(in.started), Finished: monoTime(in.finished)}
		if in.desc != nil {
			r.Op = in.desc.String()
		} else {
			r.Op = opName(in.fp, in.to, in.from)
		}
		if r.State == OpRunning {
			r.Waiting = c.waitingOn()
		}
		if r.State == OpFailed && strings.Contains(r.Err, "timed out waiting") {
			if lb := c.lastBlocked.Load(); lb != nil {
				r.Waiting = []string{*lb}
			}
		}
		out = append(out, r)
	}
	return out
}

// waitingOn lists the links a running operation is blocked on.
func (c *Comm) waitingOn() []string {
	var out []string
	now := monoNow()
	for p := range c.linkStates {
		s := &c.linkStates[p]
		if t := atomic.LoadInt64(&s.recvSince); t != 0 {
			out = append(out, fmt.Sprintf("rank %d (recv, %v)", p, time.Duration(now-t).Round(time.Microsecond)))
		}
		if t := atomic.LoadInt64(&s.sendSince); t != 0 {
			out = append(out, fmt.Sprintf("rank %d (send, %v)", p, time.Duration(now-t).Round(time.Microsecond)))
		}
	}
	return out
}

// DumpFlightRecord formats FlightRecord for people: one line per operation.
func (c *Comm) DumpFlightRecord() string {
	recs := c.FlightRecord()
	s := fmt.Sprintf("goccl flight recorder: rank %d of %d (host %s), communicator %s, last %d operations\n",
		c.rank, c.size, c.host, c.id, len(recs))
	for _, r := range recs {
		line := fmt.Sprintf("  #%-5d %-7s %-44s %-6s", r.Seq, r.State, r.Op, r.Algo)
		switch {
		case !r.Finished.IsZero():
			line += fmt.Sprintf(" took %v", r.Finished.Sub(r.Started).Round(time.Microsecond))
		case !r.Started.IsZero():
			line += fmt.Sprintf(" running for %v", time.Since(r.Started).Round(time.Microsecond))
		}
		if len(r.Waiting) > 0 {
			line += " waiting on " + strings.Join(r.Waiting, ", ")
		}
		if r.Err != "" {
			line += " error: " + r.Err
		}
		s += line + "\n"
	}
	if cur := c.getProgress().seq; len(recs) > 0 && (recs[len(recs)-1].State == OpRunning || recs[len(recs)-1].State == OpFailed) {
		for _, b := range c.behind(cur) {
			s += "  behind: " + b + "\n"
		}
	}
	return s
}

// Stats are a communicator's counters.
type Stats struct {
	Ops       uint64                // operations completed (collectives and point-to-point)
	Errors    uint64                // operations that failed
	Bytes     uint64                // user bytes passed to collectives (nccl-tests' size)
	ByAlgo    map[string]AlgoStats  // per algorithm
	Transport map[string]LinkTotals // bytes on the wire per transport
}

// AlgoStats counts one algorithm's calls.
type AlgoStats struct {
	Calls uint64
	Bytes uint64
	Time  time.Duration
}

// LinkTotals counts bytes over one transport's links.
type LinkTotals struct {
	Sent, Received uint64
	Links          int
}

// counters are guarded by the communicator's mu.
type counters struct {
	ops      uint64
	errors   uint64
	bytes    uint64
	byAlgo   map[string]*AlgoStats
	lastName string // the algorithm counted last, and its entry: saves a map lookup per call
	last     *AlgoStats
}

func (k *counters) add(algo string, bytes int, d time.Duration, err error) {
	k.ops++
	if err != nil {
		k.errors++
	}
	if algo == "" {
		return
	}
	a := k.last
	if a == nil || k.lastName != algo {
		if k.byAlgo == nil {
			k.byAlgo = map[string]*AlgoStats{}
		}
		if a = k.byAlgo[algo]; a == nil {
			a = new(AlgoStats)
			k.byAlgo[algo] = a
		}
		k.lastName, k.last = algo, a
	}
	a.Calls++
	a.Bytes += uint64(bytes)
	a.Time += d
	k.bytes += uint64(bytes)
}

// Stats returns a snapshot of the communicator's counters.
func (c *Comm) Stats() Stats {
	c.lock()
	s := Stats{Ops: c.counters.ops, Errors: c.counters.errors, Bytes: c.counters.bytes,
		ByAlgo: map[string]AlgoStats{}, Transport: map[string]LinkTotals{}}
	for k, v := range c.counters.byAlgo {
		s.ByAlgo[k] = *v
	}
	for p := range c.linkStates {
		if p == c.rank {
			continue
		}
		l := &c.linkStates[p]
		t := s.Transport[c.linkNames[p]]
		t.Sent += l.sent.Load() + l.fastSent
		t.Received += l.received.Load() + l.fastReceived
		t.Links++
		s.Transport[c.linkNames[p]] = t
	}
	c.mu.Unlock()
	return s
}

// TraceSpan records a span on this rank's timeline when GOCCL_TRACE is set (layers above
// the communicator, like dp's buckets, use it); it returns the function that ends it.
func (c *Comm) TraceSpan(cat, name string, args map[string]any) func() {
	tr := c.tracer
	if tr == nil {
		return func() {}
	}
	t0 := time.Now()
	return func() { tr.Span(tidUser, cat, name, t0, time.Since(t0), args) }
}

const tidUser = 1

func (c *Comm) startTrace() error {
	if c.cfg.TraceDir == "" {
		return nil
	}
	r, err := trace.NewRecorder(c.cfg.TraceDir, c.id, c.rank, fmt.Sprintf("rank %d (%s)", c.rank, c.host))
	if err != nil {
		return fmt.Errorf("goccl: rank %d: %w", c.rank, err)
	}
	r.Thread(tidColl, "collectives")
	r.Thread(tidUser, "user spans")
	for p := range c.size {
		if p != c.rank {
			r.Thread(tidSend+p, fmt.Sprintf("send to rank %d (%s)", p, c.linkNames[p]))
			r.Thread(tidRecv+p, fmt.Sprintf("recv from rank %d (%s)", p, c.linkNames[p]))
		}
	}
	c.tracer = r
	return nil
}
