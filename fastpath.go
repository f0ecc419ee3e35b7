package goccl

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/internal/relstore"
	"github.com/goccl/goccl/transport"
)

// The two-rank small AllReduce, with its books kept while it waits (BENCHMARKS.md,
// "Speed", 25).
//
// A blocking 8-byte AllReduce between two ranks costs the link one exchange and the
// communicator its bookkeeping: the clock, mu twice, the deadline, the flight record and
// Stats. On the development VM that is about 0.15 us of a 0.61 us call, and with none of
// it the call was as fast as Open MPI's vader ("Speed", 24). After its send each rank
// waits for the other's message, most of the time for longer than that. So this path
// sends first and keeps its books while the peer's message is on its way:
//
//   - Before the send, only what decides whether it may send: execMu, a usable
//     communicator (an atomic mirror of the sticky error and Close), an empty queue, a
//     caller whose context is not done, the choice already made for this size (the
//     exchange, smallPick), and a link that takes the message at once
//     (transport.TrySender): a send that cannot wait needs no deadline yet.
//   - After the send, under mu: the previous call's end (below), then this call's
//     start as run records it (the clock, the flight record, the deadline, the
//     caller's context armed). Then Flush (the fence TrySend left out, and a sleeping
//     peer woken) and the receive, under the deadline.
//   - At the end, the time-stamp counter (tscClock) and a pending end in place of the
//     second mu section.
//
// Together: 0.61 to 0.46 us against vader's 0.49 on that VM.
//
// A pending end is settled by whoever takes mu next (Comm.lock, which every reader of
// the operation state goes through): the next call while it waits, or the watchdog,
// Stats, the flight recorder, a cancel callback, Close. Nobody sees a finished call as
// still running. A call that fails, or whose operation context was cancelled, ends the
// general way (finish). When any condition does not hold, the call takes the general
// path (runSync), which sends the same message under the same header and tag, so ranks
// on either path understand each other.
//
// A blocking Send, Recv or SendRecv of host memory, at any world size, takes the same
// shape (fastP2P): its message first when the link takes it at once, then the books,
// then its receive, and its end left pending. In a ping-pong each rank's books then
// run while the other's message is on its way, and a SendRecv receives on the caller's
// goroutine instead of its helper's.
//
// A two-rank AllGather, ReduceScatter or AllToAll whose algorithm runs it as one
// exchange of a block each way (algos.PairExchanger) takes the AllReduce's shape with
// its own buffers (fastPair), and a two-rank Broadcast, Scatter, Gather or Reduce sent
// as one message takes a Send's shape at the rank that sends and a Recv's at the other
// (fastOneWay): 0.66-0.80 us to 0.45-0.57 for an AllGather, 0.27-0.36 to 0.16-0.17 for
// a Broadcast ("Speed", 36b).
//
// A queued Work (AllReduceAsync and the like) takes the same paths when it is next in
// line (execute): it finishes at once, and its books are settled as a blocking call's.
//
// What the books cost is mostly locked instructions, each about 6 ns here and a drain
// of the store buffer ("Speed", 35b). So the books take mu once, and the stores that
// end one call and start the next in that hold are made once: the previous call's
// deadline, running flag and receive mark are overwritten, not cleared first; the
// bytes of fast calls are plain counters under mu (linkState.fastSent); and the
// pending flag, the deadline and the links' marks, which nothing orders a later load
// against, are release stores (internal/relstore), not sync/atomic's fenced ones.
// Together with the counter's clock for the start as well as the end (tscClock), a
// fast call's own work went from about 200 to 130 ns (BenchmarkCallOverhead).
type fastPath struct {
	obs        *obsConn            // the observer of the link to the other rank (two ranks only)
	raw        transport.Conn      // the link itself
	try        transport.TrySender // raw's TrySend; nil: no fast path
	pending    pendingEnd          // written without mu while set is false (under execMu)
	set        uint32              // 1: pending holds an end not yet recorded (relstore, atomic loads)
	clock      tscClock            // the clock of calls under execMu (now, end)
	sent       uint64              // AllReduces that sent on this path, for tests; under execMu
	p2p        uint64              // point-to-point calls that took this path, for tests
	groups     uint64              // BatchSendRecvs and AllToAllVs that took this path (fastXfers), for tests
	rests      uint64              // and those of them that sent part of their messages the general way
	groupSends []sentTo            // fastXfers', kept from call to call
	barriers   uint64              // Barriers that sent on this path, for tests
	pairs      uint64              // the other collectives on this path (fastPair, fastOneWay), for tests
	calls      uint64              // calls on this path that succeeded, both kinds
}

// tscClock is the clock of every call run under execMu: monoNow's nanoseconds, read
// from the time-stamp counter where it ticks at a constant rate (tscUsable). The
// kernel clock through kvm-clock costs about 27 ns a read here against 11 for the
// counter, and a blocking call read it at its start and at its end, 0.03-0.06 us of a
// 0.5 us call ("Speed", 25 and 35a).
//
// Reads that pair both clocks calibrate the rate: the first pair is the baseline, and
// once a later one is 5 ms on, the rate is their ratio, taken again from a fresh
// baseline every 10 s. A pair counts only when the kernel clock moved less than 2 us
// around the counter's read (the rank was not descheduled between them), so the rate
// is good to a few parts in ten thousand at first and to a few in ten million after
// 10 s. Once there is a rate, a read converts the ticks since the latest pair (the
// anchor) and reads the kernel clock only when the anchor is 250 us old: the error
// of such a read is the rate's over at most 250 us, under 0.2 us, and the clock never
// goes back (last). Until there is a rate, and where the counter does not tick at a
// constant rate, every read is the kernel clock's.
type tscClock struct {
	ns0, tick0  int64   // the rate's baseline pair
	perTick     float64 // nanoseconds per tick; 0 until calibrated
	nsA, tickA  int64   // the anchor: the latest pair once there is a rate
	anchorTicks int64   // tscAnchor in ticks, 0 for no anchor
	last        int64   // the latest time read or recorded (now, end)
}

const (
	tscCalibrate = int64(5 * time.Millisecond)
	tscRefresh   = int64(10 * time.Second)
	tscPairSlack = int64(2 * time.Microsecond)
	tscAnchor    = int64(250 * time.Microsecond)
)

// now is the time in monoNow's units and the counter's tick then (0 where the counter
// is not used).
func (k *tscClock) now() (ns, tick int64) {
	if k.anchorTicks != 0 {
		tick = rdtsc()
		if d := tick - k.tickA; d >= 0 && d < k.anchorTicks {
			ns = k.nsA + int64(float64(d)*k.perTick)
			if ns < k.last {
				ns = k.last
			}
			k.last = ns
			return ns, tick
		}
	} else if !tscUsable() {
		ns = monoNow()
		k.last = max(k.last, ns)
		return k.last, 0
	}
	// A pair: the kernel clock around the counter's read.
	ns = monoNow()
	tick = rdtsc()
	if monoNow()-ns < tscPairSlack {
		if k.due(ns) {
			k.pair(ns, tick)
		}
		if k.perTick != 0 {
			k.nsA, k.tickA, k.anchorTicks = ns, tick, int64(float64(tscAnchor)/k.perTick)
		}
	}
	k.last = max(k.last, ns)
	return k.last, tick
}

// clockNow is tscClock.now's time; the caller holds execMu.
func (c *Comm) clockNow() int64 {
	ns, _ := c.fast.clock.now()
	return ns
}

// end is the time of tick, for a read of now that gave (ns, startTick): a call's end,
// which also moves last.
func (k *tscClock) end(ns, startTick, tick int64) int64 {
	if k.perTick == 0 || startTick == 0 {
		ns = monoNow()
	} else {
		ns = k.since(ns, startTick, tick)
	}
	k.last = max(k.last, ns)
	return ns
}

// due reports whether a pair read at ns would be used.
func (k *tscClock) due(ns int64) bool {
	d := ns - k.ns0
	return k.ns0 == 0 || (k.perTick == 0 && d >= tscCalibrate) || d >= tscRefresh
}

// pair takes two readings (ns from monoNow, tick from rdtsc) into the calibration.
func (k *tscClock) pair(ns, tick int64) {
	switch d := ns - k.ns0; {
	case k.ns0 == 0:
		k.ns0, k.tick0 = ns, tick
	case k.perTick == 0 && d >= tscCalibrate, d >= tscRefresh:
		if r := float64(d) / float64(tick-k.tick0); r > 0.01 && r < 100 { // 10 MHz to 100 GHz
			k.perTick = r
		} else {
			k.perTick, k.anchorTicks = 0, 0 // the counter misbehaves: stay with the kernel clock
		}
		k.ns0, k.tick0 = ns, tick
	}
}

// since is the monoNow time of tick, for a start read as (ns, startTick).
func (k *tscClock) since(ns, startTick, tick int64) int64 {
	return ns + max(0, int64(float64(tick-startTick)*k.perTick))
}

// pendingEnd is a finished call's end, not yet recorded.
type pendingEnd struct {
	rec      uint64 // its flight record
	end      int64  // monoNow
	took     time.Duration
	algo     string
	bytes    int        // for Stats
	link     *linkState // the link its receive came over, nil for none
	received int        // and the bytes it received
}

// initFastPath sets the fast path up: the two-rank AllReduce's for a two-rank
// communicator whose link can try, and the counter's clock for any with such a link.
func (c *Comm) initFastPath() {
	for peer := range c.size {
		if o := c.obsLink(peer); o != nil && o.try != nil {
			tscUsable() // read /proc/cpuinfo now, not in the first call
			break
		}
	}
	if c.size != 2 {
		return
	}
	if o := c.obsLink(1 - c.rank); o != nil && o.try != nil {
		c.fast.obs, c.fast.raw, c.fast.try = o, o.Conn, o.try
	}
}

// lock takes mu and records a pending end first (see fastPath).
func (c *Comm) lock() {
	c.mu.Lock()
	if atomic.LoadUint32(&c.fast.set) != 0 {
		if s := c.settleLocked(false); s != nil {
			relstore.Int64(&s.recvSince, 0)
		}
	}
}

// settleLocked records the pending end, as finish does for a call that succeeded, and
// as the link observer does for its receive; the caller holds mu. It returns the link
// the call received over, whose mark the caller clears. A caller that starts a fast
// call in the same hold of mu (starting: fastBegin) writes the operation state again
// at once, so the stores that end the operation are left to it: each is a locked
// instruction, most of the fast path's own cost ("Speed", 35b).
func (c *Comm) settleLocked(starting bool) *linkState {
	p := &c.fast.pending
	if s := p.link; s != nil {
		s.fastReceived += uint64(p.received)
	}
	if !starting {
		c.opRunning, c.opUser = false, nil
		relstore.Int64(&c.op.deadline, 0)
	}
	c.flight.end(p.rec, p.end, p.algo, nil)
	c.counters.add(p.algo, p.bytes, p.took, nil)
	relstore.Uint32(&c.fast.set, 0)
	return p.link
}

// fastCall runs op as w on its kind's fast path if it may (done) and returns its error;
// the caller holds execMu and releases it after. w is the communicator's inline Work
// for a blocking call (runSync), whose end is left pending, or a queued Work that is
// next in line (execute), which finishes at once and whose books are settled as a
// blocking call's: async calls take the path too.
func (c *Comm) fastCall(ctx context.Context, w *Work, op *opSpec) (done bool, err error) {
	if c.unusable.Load() || c.traceLog || c.tracer != nil || c.shared.live > 0 ||
		(w == &c.inline && c.queued.Load() != 0) || ctx.Err() != nil {
		return false, nil
	}
	if op.ext != nil {
		return c.fastExt(ctx, w, op)
	}
	switch op.coll.kind {
	case KindAllReduce:
		return c.fastAllReduce(ctx, w, op)
	case KindSendRecv:
		return c.fastP2P(ctx, w, op)
	case KindBarrier:
		return c.fastBarrier(ctx, w, op)
	case KindAllGather, KindReduceScatter, KindAllToAll:
		return c.fastPair(ctx, w, op)
	case KindBroadcast, KindScatter, KindGather, KindReduce:
		return c.fastOneWay(ctx, w, op)
	}
	return false, nil
}

// barrierPick is what a Barrier resolved to under the selector sel: whether the chosen
// algorithm, named name, runs it as one exchange of empty messages, and under which tag
// (algos.BarrierExchanger). Resolved once per selector.
type barrierPick struct {
	sel  *selector
	name string
	tag  uint32
	ok   bool
}

// fastBarrier runs a two-rank Barrier on the fast path if it may (done) and returns its
// error; the caller holds execMu and releases it after. Where the algorithm the selector
// picks runs it as one exchange of empty messages (rd's, at two ranks), it is the
// two-rank AllReduce's path with nothing to reduce: the same header and tag as the
// algorithm's own, so ranks on either path understand each other.
func (c *Comm) fastBarrier(ctx context.Context, w *Work, op *opSpec) (done bool, err error) {
	if c.fast.try == nil {
		return false, nil
	}
	bp := &c.barrier
	if sel := c.sel.Load(); bp.sel != sel {
		*bp = barrierPick{sel: sel}
		if alg, _, err := sel.pick(KindBarrier, 0, c.size, c.offload); err == nil && alg != nil {
			if x, ok := alg.(algos.BarrierExchanger); ok {
				bp.tag, bp.ok = x.BarrierTag(c.size)
				bp.name = alg.Name()
			}
		}
	}
	if !bp.ok {
		return false, nil
	}
	r, sent, err := c.fastExchange(ctx, w, op, bp.name, bp.tag, nil, nil)
	if !sent {
		return false, nil
	}
	c.fast.barriers++
	if err != nil {
		err = fmt.Errorf("goccl: rank %d: %s op #%d (%s): %w", c.rank, KindBarrier, r.hdr.Seq, bp.name, err)
		return true, c.fastFail(w, op, r.start, r.p, c.failOp(&c.op, r.hdr, err))
	}
	return true, c.fastEnd(w, op, r.start, r.tick, r.p, c.fast.obs.state, 0)
}

// fastRun is a two-rank fast call under way: its collective header, its start (and the
// counter's tick then), and its deadline.
type fastRun struct {
	hdr         transport.Header
	start, tick int64
	p           opPrep
}

// fastExchange is the two-rank fast path's exchange. send goes first, under the next
// collective header and tag, if the link takes it at once (sent; else nothing
// happened). Then the books, while the peer's message is on its way, and then the
// peer's message into theirs. err is the receive's; either way the caller ends the call
// (fastEnd, or fastFail).
func (c *Comm) fastExchange(ctx context.Context, w *Work, op *opSpec, name string, tag uint32, send, theirs []byte) (r fastRun, sent bool, err error) {
	r.hdr = transport.Header{Seq: c.seq + 1, Fp: op.fp}
	th := r.hdr
	th.Tag = tag
	if ok, err := c.fast.try.TrySend(th, send); err != nil || !ok {
		return r, false, nil // the general path sends it, or reports the link's error
	}
	c.seq = r.hdr.Seq
	// The send above and the receive below are the link's own, and fastBegin keeps
	// what the observer keeps around them (obsConn.send, recv): the bytes sent, and the
	// receive's mark. A receive that succeeds is counted and unmarked when its end is
	// settled.
	o, s := c.fast.obs, c.fast.obs.state
	r.start, r.tick, r.p = c.fastBegin(ctx, w, op, name, &r.hdr, s, nil, sentTo{s: s, n: len(send)})
	c.fast.try.Flush()
	if err = c.fast.raw.Recv(&c.op, th, theirs); err != nil {
		err = o.settle(err, &s.recvSince, &s.received, len(theirs), "receive from", r.start)
		err = fmt.Errorf("recv %d bytes from rank %d (tag %#x): %w", len(theirs), 1-c.rank, tag, err)
	}
	return r, true, err
}

// fastAllReduce runs op on the fast path if it may (done) and returns its error; the
// caller holds execMu and releases it after.
func (c *Comm) fastAllReduce(ctx context.Context, w *Work, op *opSpec) (done bool, err error) {
	k := &op.coll
	sp := &c.small
	bytes := op.bytes
	if c.fast.try == nil || !sp.ok || !sp.is(c.sel.Load(), bytes, k.dt.Size()) || !k.dt.Valid() || !k.op.Valid() {
		return false, nil
	}
	send, recv, ok := smallBuffers(k, bytes)
	if !ok {
		return false, nil
	}
	theirs := c.theirs(bytes)
	r, sent, err := c.fastExchange(ctx, w, op, sp.name, sp.tag, send, theirs)
	if !sent {
		return false, nil
	}
	c.fast.sent++
	if err == nil {
		// recv = x0 op x1 in rank order, as algos.Exchange computes it.
		x0, x1 := send, theirs
		if c.rank == 1 {
			x0, x1 = theirs, send
		}
		err = reducePair(k, recv, x0, x1)
	}
	if err != nil {
		err = fmt.Errorf("goccl: rank %d: %s op #%d (%s): %w", c.rank, k.kind, r.hdr.Seq, sp.name, err)
		return true, c.fastFail(w, op, r.start, r.p, c.failOp(&c.op, r.hdr, err))
	}
	return true, c.fastEnd(w, op, r.start, r.tick, r.p, c.fast.obs.state, bytes)
}

// pairPick is what a two-rank AllGather, ReduceScatter or AllToAll of bytes bytes
// (elements of esz bytes) resolved to under sel: whether the chosen algorithm, named
// name, runs it as one exchange, and under which tag (algos.PairExchanger).
type pairPick struct {
	sel        *selector
	bytes, esz int
	name       string
	tag        uint32
	ok         bool
}

// pairSlot is kind's pairPick in Comm.pairs.
func pairSlot(kind Kind) int {
	switch kind {
	case KindAllGather:
		return 0
	case KindReduceScatter:
		return 1
	case KindAllToAll:
		return 2
	case KindBroadcast:
		return 3
	case KindScatter:
		return 4
	case KindGather:
		return 5
	}
	return 6 // Reduce
}

// pairFor returns what k, of bytes bytes in blocks of n, resolves to when the chosen
// algorithm runs it as one exchange between the two ranks (algos.PairExchanger), and nil
// when it does not or the staging area takes it. The choice is resolved once per
// selector, size and element size.
func (c *Comm) pairFor(k *call, bytes, n int) *pairPick {
	p := &c.pairs[pairSlot(k.kind)]
	if sel, esz := c.sel.Load(), k.dt.Size(); p.sel != sel || p.bytes != bytes || p.esz != esz {
		*p = pairPick{sel: sel, bytes: bytes, esz: esz}
		if alg, _, err := sel.pick(k.kind, bytes, c.size, c.offload); err == nil && alg != nil && alg != directAlgo && alg != stagedAlgo {
			if x, ok := alg.(algos.PairExchanger); ok {
				chunk := algos.ChunkSize(&algos.Args{DType: k.dt, ChunkBytes: c.chunk}, algos.DefaultChunkBytes)
				p.tag, p.ok = x.PairTag(k.kind, n, chunk, c.eager)
				p.name = alg.Name()
			}
		}
	}
	if !p.ok || c.stagedFirst(k.kind, bytes) {
		return nil
	}
	return p
}

// pairBuffers returns k's buffers cut to what this rank of two uses (nil for one it does
// not use) when they are host memory and plainly fit the call (algos.Fit: what
// algos.Validate would take). ok is false otherwise: the general path then runs the
// call, or says what is wrong.
func (c *Comm) pairBuffers(k *call) (send, recv []byte, ok bool) {
	if k.send.Kind() != transport.Host || k.recv.Kind() != transport.Host {
		return nil, nil, false
	}
	return algos.Fit(k.kind, k.count, k.dt, k.op, c.size, c.rank, k.root, k.send.Bytes(), k.recv.Bytes())
}

// theirs is n bytes of the communicator's scratch (exchIn) for a peer's message that a
// fast call reduces.
func (c *Comm) theirs(n int) []byte {
	if len(c.exchIn) < n {
		c.exchIn = make([]byte, max(n, 2*algos.SmallExchangeMax))
	}
	return c.exchIn[:n:n]
}

// reducePair sets dst to a op b, the two ranks' parts of k, divided by 2 for avg.
func reducePair(k *call, dst, a, b []byte) error {
	if err := reduce.Apply3(k.dt, k.op, dst, a, b); err != nil || k.op != transport.Avg {
		return err
	}
	return reduce.Finish(k.dt, k.op, dst, 2)
}

// pairMaxCount bounds the count fastPair looks at, so that its byte sizes cannot
// overflow; the links take far less at once anyway (over shm 2 KiB).
const pairMaxCount = 1 << 16

// fastPair runs a two-rank AllGather, ReduceScatter or AllToAll on the fast path if it
// may (done) and returns its error; the caller holds execMu and releases it after. At
// two ranks each is one block each way where the algorithm the selector picks says so
// (algos.PairExchanger: the ring's AllGather and ReduceScatter, naive's AllToAll), and
// then it is the two-rank AllReduce's path with other buffers: the block for the peer
// goes first when the link takes it at once, then the books, then the peer's block,
// into its place in Recv or reduced with the own block. The same header, tag and bytes
// as the algorithm's own message, so ranks on either path understand each other.
// Buffers that are not plainly valid (too short, overlapping other than in NCCL's
// in-place form) take the general path, which says what is wrong.
func (c *Comm) fastPair(ctx context.Context, w *Work, op *opSpec) (done bool, err error) {
	k := &op.coll
	if c.fast.try == nil || k.count <= 0 || k.count > pairMaxCount {
		return false, nil
	}
	send, recv, ok := c.pairBuffers(k)
	if !ok {
		return false, nil
	}
	r, n := c.rank, k.count*k.dt.Size()
	peer := 1 - r
	own := send // the own block of Send (AllGather: Send itself)
	if k.kind != KindAllGather {
		own = send[r*n : r*n+n]
	}
	p := c.pairFor(k, algos.Bytes(k.kind, k.count, k.dt, 2), n)
	if p == nil {
		return false, nil
	}
	var out, theirs []byte // the block for the peer, and where the peer's lands
	switch k.kind {
	case KindAllGather:
		out, theirs = send, recv[peer*n:peer*n+n]
	case KindReduceScatter:
		out, theirs = send[peer*n:peer*n+n], c.theirs(n)
	default:
		out, theirs = send[peer*n:peer*n+n], recv[peer*n:peer*n+n]
	}
	run, sent, err := c.fastExchange(ctx, w, op, p.name, p.tag, out, theirs)
	if !sent {
		return false, nil
	}
	c.fast.pairs++
	if err == nil {
		if k.kind == KindReduceScatter {
			err = reducePair(k, recv, own, theirs)
		} else {
			algos.CopyDistinct(recv[r*n:r*n+n], own)
		}
	}
	if err != nil {
		err = fmt.Errorf("goccl: rank %d: %s op #%d (%s): %w", c.rank, k.kind, run.hdr.Seq, p.name, err)
		return true, c.fastFail(w, op, run.start, run.p, c.failOp(&c.op, run.hdr, err))
	}
	return true, c.fastEnd(w, op, run.start, run.tick, run.p, c.fast.obs.state, n)
}

// fastOneWay runs a two-rank Broadcast, Scatter, Gather or Reduce on the fast path if it
// may (done) and returns its error; the caller holds execMu and releases it after. Where
// the chosen algorithm sends it as one message (algos.PairExchanger: the ring's
// Broadcast and Reduce, naive's Gather and Scatter), the rank that sends (the root of a
// Broadcast or Scatter, the other rank of a Gather or Reduce) sends when the link takes
// the message at once, keeps its books and is done, as a Send is (fastP2P); the other
// rank keeps its books and receives (and reduces, for a Reduce). The same header and
// tag as the algorithm's own.
func (c *Comm) fastOneWay(ctx context.Context, w *Work, op *opSpec) (done bool, err error) {
	k := &op.coll
	// Sizes the stream tuner times run the general path on both ranks, so that both
	// count the same calls (streamtune.go); the sender's message is far smaller anyway.
	if c.fast.try == nil || k.count <= 0 || k.count > pairMaxCount || 2*k.count*k.dt.Size() >= streamTuneMin {
		return false, nil
	}
	send, recv, ok := c.pairBuffers(k)
	if !ok {
		return false, nil
	}
	r, n := c.rank, k.count*k.dt.Size()
	peer, root := 1-r, r == k.root
	sends := root // the rank that sends: the root of a Broadcast or Scatter, the other of a Gather or Reduce
	if k.kind == KindGather || k.kind == KindReduce {
		sends = !root
	}
	p := c.pairFor(k, algos.Bytes(k.kind, k.count, k.dt, 2), n)
	if p == nil {
		return false, nil
	}
	hdr := transport.Header{Seq: c.seq + 1, Fp: op.fp}
	th := hdr
	th.Tag = p.tag
	s := c.fast.obs.state
	if sends {
		out := send // Broadcast, Gather, Reduce
		if k.kind == KindScatter {
			out = send[peer*n : peer*n+n]
		}
		if ok, err := c.fast.try.TrySend(th, out); err != nil || !ok {
			return false, nil // the general path sends it, or reports the link's error
		}
		c.seq = hdr.Seq
		c.fast.pairs++
		start, tick, pp := c.fastBegin(ctx, w, op, p.name, &hdr, nil, nil, sentTo{s: s, n: n})
		c.fast.try.Flush()
		switch k.kind {
		case KindBroadcast:
			algos.CopyDistinct(recv, send)
		case KindScatter:
			algos.CopyDistinct(recv, send[r*n:r*n+n])
		}
		return true, c.fastEnd(w, op, start, tick, pp, nil, 0)
	}
	into := recv // Broadcast, Scatter
	switch k.kind {
	case KindGather:
		into = recv[peer*n : peer*n+n]
	case KindReduce:
		into = c.theirs(n)
	}
	c.seq = hdr.Seq
	c.fast.pairs++
	start, tick, pp := c.fastBegin(ctx, w, op, p.name, &hdr, s, nil)
	err = c.fast.raw.Recv(&c.op, th, into)
	if err != nil {
		err = c.fast.obs.settle(err, &s.recvSince, &s.received, n, "receive from", start)
		err = fmt.Errorf("recv %d bytes from rank %d (tag %#x): %w", n, peer, p.tag, err)
	} else {
		switch k.kind {
		case KindGather:
			algos.CopyDistinct(recv[r*n:r*n+n], send)
		case KindReduce: // Recv = Send op theirs, as the ring's last rank computes it
			err = reducePair(k, recv, send, into)
		}
	}
	if err != nil {
		err = fmt.Errorf("goccl: rank %d: %s op #%d (%s): %w", c.rank, k.kind, hdr.Seq, p.name, err)
		return true, c.fastFail(w, op, start, pp, c.failOp(&c.op, hdr, err))
	}
	return true, c.fastEnd(w, op, start, tick, pp, s, n)
}

// fastP2P runs a blocking SendRecv, Send or Recv of host memory on the fast path if it
// may (done) and returns its error; the caller holds execMu and releases it after. As
// for the two-rank AllReduce, the message goes first when the link takes it at once
// (transport.TrySender; shm up to 2 KiB, tcp 16 KiB), then the books, then the
// receive; the end is left pending. Over shm that took an 8-byte ping-pong's round trip (a Send and
// a Recv on each rank) from 1.23-1.27 to 0.90-0.92 us (BENCHMARKS.md, "Speed", 34c).
// Any world size: a point-to-point call uses only its peers' links.
func (c *Comm) fastP2P(ctx context.Context, w *Work, op *opSpec) (done bool, err error) {
	k := &op.coll
	to, from := k.to, k.from
	if k.send.Kind() != transport.Host || k.recv.Kind() != transport.Host || c.checkP2P(k.send, to, k.recv, from, k.count, k.dt) != nil {
		return false, nil // the general path says what is wrong
	}
	n := k.count * k.dt.Size()
	var out, in *obsConn
	if to >= 0 {
		if out = c.obsLink(to); out == nil || out.try == nil {
			return false, nil
		}
	}
	if from >= 0 {
		if in = c.obsLink(from); in == nil {
			return false, nil
		}
	}
	if out != nil {
		// Before the receive, so an in-place call's message is what it held before.
		h := transport.Header{Seq: c.sendSeq[to] + 1, Fp: op.fp}
		if sent, err := out.try.TrySend(h, k.send.Bytes()[:n]); err != nil || !sent {
			return false, nil // the general path sends it, or reports the link's error
		}
		c.sendSeq[to] = h.Seq
	}
	c.fast.p2p++

	var sendOn, recvOn *linkState
	if out != nil {
		sendOn = out.state
	}
	if in != nil {
		recvOn = in.state
	}
	start, tick, p := c.fastBegin(ctx, w, op, "p2p", nil, recvOn, nil, sentTo{s: sendOn, n: n})
	if out != nil {
		out.try.Flush()
	}
	if in == nil {
		return true, c.fastEnd(w, op, start, tick, p, nil, 0)
	}
	s := in.state
	c.recvSeq[from]++
	if err = in.Conn.Recv(&c.op, transport.Header{Seq: c.recvSeq[from], Fp: op.fp}, k.recv.Bytes()[:n]); err != nil {
		err = in.settle(err, &s.recvSince, &s.received, n, "receive from", start)
		err = fmt.Errorf("goccl: rank %d: recv from rank %d: %w", c.rank, from, err)
		return true, c.fastFail(w, op, start, p, c.failOp(&c.op, transport.Header{Seq: c.seq, Fp: op.fp}, err))
	}
	return true, c.fastEnd(w, op, start, tick, p, s, n)
}

// obsLink is the observer of the link to peer (nil for none).
func (c *Comm) obsLink(peer int) *obsConn {
	switch l := c.links[peer].(type) {
	case *obsConn:
		return l
	case *obsStreamConn:
		return l.obsConn
	}
	return nil
}

// fastBegin keeps a fast call's books at its start, once its message has left: the
// clock (and the counter's, see tscClock), the flight record, the deadline, the
// caller's context armed. hdr is a collective's header, nil for a point-to-point call;
// recvOn is the link the call will receive over (nil for none or several), and sends
// are the messages it sent before, counted here, as are the receives among recvs (a
// group's messages, which fastRecvs runs after).
func (c *Comm) fastBegin(ctx context.Context, w *Work, op *opSpec, algo string, hdr *transport.Header, recvOn *linkState, recvs []xfer, sends ...sentTo) (start, tick int64, p opPrep) {
	start, tick = c.fast.clock.now()
	p = c.prep(ctx, start)
	p.cancelled = false // it has started: a context done by now cancels it (arm)
	c.mu.Lock()
	if atomic.LoadUint32(&c.fast.set) != 0 {
		if s := c.settleLocked(true); s != nil && s != recvOn {
			relstore.Int64(&s.recvSince, 0)
		}
	}
	for i := range sends {
		if x := &sends[i]; x.s != nil {
			x.s.fastSent += uint64(x.n)
		}
	}
	for i := range recvs {
		if x := &recvs[i]; x.recv {
			c.linkStates[x.peer].fastReceived += uint64(len(x.buf))
		}
	}
	if recvOn != nil {
		relstore.Int64(&recvOn.recvSince, start) // as obsConn.mark, with opSince = start below
	}
	w.algo = algo
	if w == &c.inline {
		w.ctx, w.err = ctx, nil
		c.flight.queued(w, op, start, true)
	} else {
		c.flight.started(w.rec, start)
	}
	c.opStartLocked(ctx, start, p.dl, hdr)
	c.mu.Unlock()
	c.opSince = start
	c.arm(ctx)
	return start, tick, p
}

// sentTo is a fast call's message that left before its books (fastBegin counts it): n
// bytes over the link with state s (nil for none), which try flushes (fastXfers').
type sentTo struct {
	s   *linkState
	n   int
	try transport.TrySender
}

// fastFail ends a fast call run as w that failed with err, the general way, and
// returns the error its caller gets.
func (c *Comm) fastFail(w *Work, op *opSpec, start int64, p opPrep, err error) error {
	c.finish(w, op, start, p, err)
	if w == &c.inline {
		err, w.ctx = w.err, nil
	}
	return err
}

// fastEnd ends a fast call run as w that succeeded, begun at start (tick on the
// counter), whose receive of n bytes came over the link with state s (nil for none):
// as a pending end, or through finish when the operation context was cancelled after
// its last message. A queued Work finishes here; its books are settled as a blocking
// call's.
func (c *Comm) fastEnd(w *Work, op *opSpec, start, tick int64, p opPrep, s *linkState, n int) error {
	end := c.fast.clock.end(start, tick, rdtsc())
	if c.op.Context.Err() != nil { // finish refreshes the context
		if s != nil {
			relstore.Int64(&s.recvSince, 0)
			s.received.Add(uint64(n))
		}
		return c.fastFail(w, op, start, p, nil)
	}
	c.fast.pending = pendingEnd{rec: w.rec, end: end, took: time.Duration(end - start), algo: w.algo, bytes: op.bytes, link: s, received: n}
	relstore.Uint32(&c.fast.set, 1) // after pending: what lock reads once it sees 1
	c.fast.calls++
	if w == &c.inline {
		w.ctx = nil // do not keep the caller's context alive
	} else {
		w.finish(nil)
	}
	return nil
}
