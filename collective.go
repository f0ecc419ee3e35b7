package goccl

import (
	"context"
	"errors"
	"fmt"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/direct"
	"github.com/goccl/goccl/algos/staged"
	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/transport"
)

// call is one collective (or SendRecv) as the user issued it.
type call struct {
	kind       Kind
	send, recv Buffer
	count      int
	dt         DType
	op         Op
	root       int
	to, from   int // SendRecv's peers (-1: that half is skipped)
}

func (k *call) fingerprint() transport.Fingerprint {
	fp := transport.Fingerprint{Kind: k.kind, DType: k.dt, Op: k.op, Count: uint64(k.count), Root: int32(k.root)}
	switch k.kind {
	case KindAllReduce, KindReduce, KindReduceScatter:
	default:
		fp.Op = Sum // non-reducing collectives ignore op; do not let it cause a mismatch
	}
	switch k.kind {
	case KindReduce, KindBroadcast, KindGather, KindScatter:
	default:
		fp.Root = -1
	}
	if k.kind == KindBarrier {
		fp.DType, fp.Count = Uint8, 0
	}
	return fp
}

// opPeers is the Peers view an algorithm gets for one operation.
type opPeers struct {
	c   *Comm
	hdr transport.Header
}

func (p *opPeers) Rank() int                    { return p.c.rank }
func (p *opPeers) Size() int                    { return p.c.size }
func (p *opPeers) Link(peer int) transport.Conn { return p.c.links[peer] }
func (p *opPeers) Host(r int) string            { return p.c.PeerHost(r) }
func (p *opPeers) Transport(r int) string       { return p.c.TransportOf(r) }
func (p *opPeers) EagerBytes() int              { return p.c.eager }
func (p *opPeers) Header(tag uint32) transport.Header {
	h := p.hdr
	h.Tag = tag
	return h
}

// collective queues k (a collective or a SendRecv) and returns its Work.
func (c *Comm) collective(ctx context.Context, k call) *Work {
	w := &Work{ctx: ctx, opSpec: opSpec{coll: k}}
	w.opSpec.prepare()
	return c.submit(w)
}

// runCollective runs k, collective number hdr.Seq (execute numbers them).
func (c *Comm) runCollective(ctx context.Context, w *Work, k *call, hdr transport.Header) error {
	var (
		cls   *streamClass // the size class this call is timed in (streamtune.go); nil: not timed
		on    bool
		bytes int
		start int64
		try   algoTry // auto's online choice for this call (algotune.go)
	)
	if c.streamTune.links != nil || c.algoTune.on {
		bytes = algos.Bytes(k.kind, k.count, k.dt, c.size)
	}
	if c.streamTune.links != nil {
		cls, on = c.streamTune.before(bytes)
	}
	if cls != nil || c.algoTune.on && bytes >= c.algoTune.min { // a call the tuners may time
		start = c.clockNow()
	}
	err := c.doCollective(ctx, w, k, hdr, &try)
	if err == nil && (cls != nil || try.timed) {
		ns := c.clockNow() - start
		if cls != nil && (try.cls == nil || try.i == try.cls.choice) { // a try of another algorithm says nothing of the links
			cls.record(on, bytes, ns)
		}
		if try.timed {
			try.cls.record(try.i, bytes, ns)
		}
	}
	if err == nil && try.agree {
		err = c.algoAgree(ctx, &opPeers{c: c, hdr: hdr}, try.cls)
	}
	if err == nil {
		return nil
	}
	return c.failOp(ctx, hdr, err)
}

// opScratch is what one collective needs besides its call, kept in the communicator and
// reused (operations run one at a time under execMu) so that a small collective
// allocates nothing.
type opScratch struct {
	args  algos.Args
	peers opPeers
}

// doCollective runs k. try, when not nil, is where auto's online choice for the call
// goes (algotune.go); runCollective times the call for it.
func (c *Comm) doCollective(ctx context.Context, w *Work, k *call, hdr transport.Header, try *algoTry) error {
	if !k.dt.Valid() {
		return fmt.Errorf("goccl: rank %d: %s: %w: unknown dtype %d (valid: int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16)",
			c.rank, k.kind, transport.ErrInvalid, k.dt)
	}
	if !k.op.Valid() {
		return fmt.Errorf("goccl: rank %d: %s: %w: unknown op %d (valid: sum, prod, max, min, avg)", c.rank, k.kind, transport.ErrInvalid, k.op)
	}
	bytes := algos.Bytes(k.kind, k.count, k.dt, c.size)
	if k.kind == KindAllReduce && bytes <= algos.SmallExchangeMax && !c.traceLog {
		if done, err := c.exchange(ctx, w, k, hdr, bytes); done {
			return err
		}
	}
	alg, reason, err := c.sel.Load().pick(k.kind, bytes, c.size, c.offload)
	if err != nil {
		return fmt.Errorf("goccl: rank %d: %s: %w", c.rank, k.kind, err)
	}
	if alg == nil { // the offloader runs it natively
		w.algo = offloadAlgo
		return c.offload.Offload(ctx, &transport.Collective{Kind: k.kind, Send: k.send, Recv: k.recv,
			Count: k.count, DType: k.dt, Op: k.op, Root: k.root, SendPeer: -1, RecvPeer: -1})
	}
	stage := alg == stagedAlgo || c.stagedFirst(k.kind, bytes)
	if try != nil && k.kind == KindAllReduce && c.algoTune.on && c.sel.Load().spec.Auto(k.kind, bytes) {
		pick := alg
		if stage {
			pick = stagedAlgo
		}
		if *try = c.algoBefore(bytes, pick); try.cls != nil {
			alg = try.cls.cands[try.i]
			stage = alg == stagedAlgo
			reason = "auto's online choice (algo_tune online; model: " + reason + ")"
		}
	}
	w.algo = alg.Name()
	if c.traceLog { // nothing is formatted on the hot path otherwise
		c.log.Log(ctx, LevelTrace, "collective", "subsys", "COLL", "seq", hdr.Seq, "op", hdr.Fp.String(), "algo", alg.Name(), "why", reason)
	}
	send, recv, finish, err := c.hostBuffers(ctx, k.send, k.recv)
	if err != nil {
		return fmt.Errorf("goccl: rank %d: %s: %w", c.rank, k.kind, err)
	}
	a, peers := &c.scratch.args, &c.scratch.peers
	*a = algos.Args{Kind: k.kind, Send: send, Recv: recv, Count: k.count, DType: k.dt, Op: k.op,
		Root: k.root, SendPeer: -1, RecvPeer: -1, ChunkBytes: c.chunk}
	*peers = opPeers{c: c, hdr: hdr}
	defer func() { *a, *peers = algos.Args{}, opPeers{} }() // do not keep the caller's buffers alive
	if err := algos.Validate(a, c.rank, c.size); err != nil {
		finish(false)
		return fmt.Errorf("goccl: rank %d: %w", c.rank, err)
	}
	if alg == directAlgo || c.shared.live > 0 && c.directFirst(k, bytes) {
		err := direct.Algorithm{}.Run(ctx, peers, a)
		switch {
		case err == nil:
			w.algo = direct.Name
			if try != nil {
				try.timed = false // the tuner's candidate did not run
			}
			if c.traceLog {
				c.log.Log(ctx, LevelTrace, "collective", "subsys", "COLL", "seq", hdr.Seq, "op", hdr.Fp.String(), "algo", direct.Name, "why", "every rank's buffers are in AllocShared memory")
			}
			return finish(true)
		case !errors.Is(err, direct.ErrNotShared):
			finish(false)
			return fmt.Errorf("goccl: rank %d: %s op #%d (%s): %w", c.rank, k.kind, hdr.Seq, direct.Name, err)
		case alg == directAlgo: // configured, but some rank's buffers are not shared: ring, or its fallback
			if alg, _, err = algos.Resolve("ring", k.kind, bytes, c.size, c.sel.Load().model); err != nil {
				finish(false)
				return fmt.Errorf("goccl: rank %d: %s: %w", c.rank, k.kind, err)
			}
			w.algo = alg.Name()
		}
	}
	if stage {
		ran, err := c.runStaged(ctx, peers, a)
		switch {
		case ran && err == nil:
			w.algo = staged.Name
			return finish(true)
		case ran:
			finish(false)
			return fmt.Errorf("goccl: rank %d: %s op #%d (%s): %w", c.rank, k.kind, hdr.Seq, staged.Name, err)
		case alg == stagedAlgo: // configured, but the group has no staging area: ring, or its fallback
			if alg, _, err = algos.Resolve("ring", k.kind, bytes, c.size, c.sel.Load().model); err != nil {
				finish(false)
				return fmt.Errorf("goccl: rank %d: %s: %w", c.rank, k.kind, err)
			}
			w.algo = alg.Name()
		}
	}
	if err := alg.Run(ctx, peers, a); err != nil {
		finish(false)
		return fmt.Errorf("goccl: rank %d: %s op #%d (%s): %w", c.rank, k.kind, hdr.Seq, alg.Name(), err)
	}
	return finish(true)
}

// smallPick is what a small AllReduce of bytes bytes (elements of esz bytes) resolved to
// under the selector sel: whether the chosen algorithm, named name, sends it as one
// direct exchange, and under which tag (algos.Exchanger). The communicator keeps the
// last one (under execMu), so a run of calls of one size resolves it once.
type smallPick struct {
	sel        *selector
	bytes, esz int
	name       string
	tag        uint32
	ok         bool
}

// is reports whether p was resolved for calls of bytes bytes of esz-byte elements under
// sel.
func (p *smallPick) is(sel *selector, bytes, esz int) bool {
	return p.sel == sel && p.bytes == bytes && p.esz == esz
}

// smallBuffers returns k's send and recv, cut to bytes, when the cheap sufficient check
// of exchange (and fastAllReduce) passes: a count within algos.SmallExchangeMax, host
// memory, long enough, and the same memory or apart. ok is false otherwise, and the
// general path reports what is wrong, if anything.
func smallBuffers(k *call, bytes int) (send, recv []byte, ok bool) {
	// The count bound also keeps bytes honest: a count whose byte size overflowed to a
	// small number goes to algos.Validate, which says so.
	if k.count < 0 || k.count > algos.SmallExchangeMax || k.send.Kind() != transport.Host || k.recv.Kind() != transport.Host {
		return nil, nil, false
	}
	send, recv = k.send.Bytes(), k.recv.Bytes()
	if len(send) < bytes || len(recv) < bytes {
		return nil, nil, false
	}
	send, recv = send[:bytes:bytes], recv[:bytes:bytes]
	if !algos.SameMemory(send, recv) && !algos.Apart(send, recv) {
		return nil, nil, false
	}
	return send, recv, true
}

// exchange runs a small AllReduce itself when the algorithm the selector picks for it
// sends it as one direct exchange (algos.Exchanger): the same messages as that
// algorithm's Run, received into the communicator's own scratch. It skips what the
// general path repeats for every call and a run of small calls does not need: the
// choice is resolved once per size (smallPick), the buffers get the cheap sufficient
// check below instead of Args and algos.Validate, and the algorithm's pooled buffers
// are not used. done is false when the call is not of that kind, or its buffers are
// not plainly valid: the general path then runs it, or reports what is wrong with it.
func (c *Comm) exchange(ctx context.Context, w *Work, k *call, hdr transport.Header, bytes int) (done bool, err error) {
	send, recv, ok := smallBuffers(k, bytes)
	if !ok || c.shared.live > 0 && c.directFirst(k, bytes) {
		return false, nil
	}
	p := &c.small
	if sel, esz := c.sel.Load(), k.dt.Size(); !p.is(sel, bytes, esz) {
		*p = smallPick{sel: sel, bytes: bytes, esz: esz}
		alg, _, err := sel.pick(k.kind, bytes, c.size, c.offload)
		if err != nil || alg == nil || alg == directAlgo {
			return false, nil // the general path reports the error, or offloads
		}
		if x, ok := alg.(algos.Exchanger); ok {
			chunk := algos.ChunkSize(&algos.Args{DType: k.dt, ChunkBytes: c.chunk}, algos.DefaultChunkBytes)
			p.tag, p.ok = x.ExchangeTag(bytes, c.size, chunk, c.eager)
			p.name = alg.Name()
		}
	}
	if !p.ok {
		return false, nil
	}
	w.algo = p.name
	if need := c.size * bytes; len(c.exchIn) < need {
		c.exchIn = make([]byte, c.size*algos.SmallExchangeMax)
	}
	peers := &c.scratch.peers
	*peers = opPeers{c: c, hdr: hdr}
	err = algos.Exchange(ctx, peers, p.tag, k.dt, k.op, send, recv, c.exchIn)
	*peers = opPeers{}
	if err != nil {
		return true, fmt.Errorf("goccl: rank %d: %s op #%d (%s): %w", c.rank, k.kind, hdr.Seq, p.name, err)
	}
	return true, nil
}

func hostFinish(bool) error { return nil }

// hostBuffers returns host views of send and recv. Device buffers are staged through
// pinned host memory: finish(true) copies the result back and frees the staging.
func (c *Comm) hostBuffers(ctx context.Context, send, recv Buffer) (s, r []byte, finish func(ok bool) error, err error) {
	if send.Kind() == transport.Host && recv.Kind() == transport.Host {
		return send.Bytes(), recv.Bytes(), hostFinish, nil
	}
	return c.stageBuffers(ctx, send, recv)
}

// stageBuffers is hostBuffers for device memory (apart, so that the host path does not
// move its arguments to the heap for the closures below).
func (c *Comm) stageBuffers(ctx context.Context, send, recv Buffer) (s, r []byte, finish func(ok bool) error, err error) {
	if cuda.Loaded() == nil {
		// Load the runtime the config names (GOCCL_CUDA_LIB); the stager uses it.
		cuda.Load(c.cfg.Params["cuda.lib"])
	}
	st, err := transport.DeviceStager()
	if err != nil {
		return nil, nil, nil, err
	}
	var frees []func()
	stage := func(b Buffer, in bool) ([]byte, error) {
		if b.Kind() == transport.Host {
			return b.Bytes(), nil
		}
		h, free, err := st.PinnedAlloc(b.Len())
		if err != nil {
			return nil, err
		}
		frees = append(frees, free)
		if in {
			if err := st.ToHost(ctx, h, b); err != nil {
				return nil, err
			}
		}
		return h, nil
	}
	release := func() {
		for _, f := range frees {
			f()
		}
	}
	if transport.Same(send, recv) {
		// In place: NCCL's aliased forms give send and recv one start but different
		// lengths (ReduceScatter's recv is send's first block on rank 0, AllGather's send
		// is recv's), so stage the larger and view both at offset 0.
		big := send
		if recv.Len() > send.Len() {
			big = recv
		}
		b, err := stage(big, true)
		if err != nil {
			release()
			return nil, nil, nil, err
		}
		s, r = b[:send.Len()], b[:recv.Len()]
	} else {
		if s, err = stage(send, true); err == nil {
			r, err = stage(recv, true)
		}
		if err != nil {
			release()
			return nil, nil, nil, err
		}
	}
	finish = func(ok bool) error {
		defer release()
		if ok && recv.Kind() == transport.Device {
			return st.FromHost(ctx, recv, r[:recv.Len()])
		}
		return nil
	}
	return s, r, finish, nil
}
