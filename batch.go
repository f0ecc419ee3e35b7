package goccl

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"unsafe"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// P2POp is one send or receive of a BatchSendRecv, like torch.distributed.P2POp.
type P2POp struct {
	Peer  int  // the other rank (or this rank itself: see BatchSendRecv)
	Recv  bool // receive into Buf from Peer; false: send Buf to Peer
	Buf   Buffer
	Count int // elements of DType
	DType DType
}

// SendOp is the P2POp that sends count elements of buf to peer.
func SendOp(buf Buffer, count int, dt DType, peer int) P2POp {
	return P2POp{Peer: peer, Buf: buf, Count: count, DType: dt}
}

// RecvOp is the P2POp that receives count elements from peer into buf.
func RecvOp(buf Buffer, count int, dt DType, peer int) P2POp {
	return P2POp{Peer: peer, Recv: true, Buf: buf, Count: count, DType: dt}
}

func (o P2POp) String() string {
	if o.Recv {
		return fmt.Sprintf("recv %d %s from rank %d", o.Count, o.DType, o.Peer)
	}
	return fmt.Sprintf("send %d %s to rank %d", o.Count, o.DType, o.Peer)
}

// BatchSendRecv runs ops together and returns when every one has finished: the sends
// and receives of one rank with several peers at once (a halo exchange, a pipeline
// stage's neighbours, an exchange of uneven blocks), as torch.distributed's
// batch_isend_irecv followed by a wait on each request, or NCCL's ncclSend and ncclRecv
// between ncclGroupStart and ncclGroupEnd. No operation of a batch waits for another,
// so every pattern in which each send has its matching receive completes, whatever the
// order of ops on each rank; Send and Recv alone run one at a time, and two ranks that
// both Send a large message first wait for each other until the timeout.
//
// Messages between two ranks match in order: the k-th message this rank sends to a
// peer, counting those of Send, SendRecv and earlier batches, is the peer's k-th
// receive from this rank, in whichever of those calls it is, and must have the same
// count and dtype, or both ranks fail with ErrMismatch. A send to this rank itself is
// copied into the receive from itself in the same position of the batch, which must
// have the same count and dtype. What a send carries is its buffer as it was before the
// call, even where a receive of the same batch overwrites that memory; two receives may
// not share memory.
//
// Like every operation it runs in issue order with the communicator's others. A bad
// op (an unknown dtype, a peer outside the communicator, a buffer too short) fails the
// call on this rank with ErrInvalid before anything is sent, and the peers' calls with
// an error that names this rank.
func (c *Comm) BatchSendRecv(ctx context.Context, ops []P2POp) error {
	b, fresh := c.batchHome.take()
	if fresh {
		b.home = &c.batchHome
	}
	b.hold()
	b.ops = append(b.inline[:0], ops...)
	op := opSpec{ext: b, bytes: batchBytes(b.ops)}
	err := c.runSync(ctx, &op)
	b.release()
	return err
}

// BatchSendRecvAsync queues a BatchSendRecv. ops may be reused at once; their buffers
// only once the Work is done.
func (c *Comm) BatchSendRecvAsync(ctx context.Context, ops []P2POp) *Work {
	return c.submit(&Work{ctx: ctx, opSpec: c.batchSpec(ops)})
}

// batchSpec is the operation that runs ops: a batchCall, which runBatch runs, or the
// fast path (fastBatch).
func (c *Comm) batchSpec(ops []P2POp) opSpec {
	b := newBatchCall(ops)
	return opSpec{ext: b, bytes: batchBytes(b.ops)}
}

// batchBytes is what ops carry, for Stats (bad ops count nothing).
func batchBytes(ops []P2POp) int {
	bytes := 0
	for _, o := range ops {
		if o.DType.Valid() && o.Count > 0 {
			bytes += o.Count * o.DType.Size()
		}
	}
	return bytes
}

// batchCall is one BatchSendRecv: its ops, copied (an asynchronous call's caller may
// reuse its slice, and the flight recorder names them after the call), in the same
// allocation as the call up to batchInline ops. A blocking call's comes from the
// communicator's home and goes back to it (descHome).
type batchCall struct {
	ops    []P2POp
	inline [batchInline]P2POp
	holders
	home *descHome[batchCall] // nil: a queued call's
}

// release lets one holder of a homed batchCall go (descHome); the last clears the
// caller's buffers out of it and hands it back.
func (b *batchCall) release() {
	if b.home != nil && b.drop() {
		clear(b.inline[:])
		b.ops = nil
		b.home.spare.Store(b)
	}
}

// batchInline is how many ops a batchCall holds without a second allocation: a halo
// exchange's four (both neighbours, each way).
const batchInline = 4

func newBatchCall(ops []P2POp) *batchCall {
	b := new(batchCall)
	if len(ops) <= batchInline {
		b.ops = append(b.inline[:0], ops...)
	} else {
		b.ops = slices.Clone(ops)
	}
	return b
}

func (b *batchCall) failed() transport.Fingerprint { return batchFingerprint }

// batchFingerprint is what a failed batch tells its peers it was in (failOp).
var batchFingerprint = transport.Fingerprint{Kind: KindSendRecv, Root: -1}

// String names a batch in the flight recorder: formatted only when read.
func (b *batchCall) String() string {
	const shown = 4
	s := fmt.Sprintf("batch of %d:", len(b.ops))
	for i, o := range b.ops {
		if i == shown {
			return s + fmt.Sprintf(" ... (%d more)", len(b.ops)-shown)
		}
		s += " " + o.String() + ";"
	}
	return s
}

// xfer is one message of a batch or an AllToAllV, on host memory, with its header.
type xfer struct {
	peer int
	recv bool
	h    transport.Header
	buf  []byte
}

// batchScratch is what BatchSendRecv and AllToAllV need besides their arguments, kept
// by the communicator (operations run one at a time, under execMu) so that a call
// allocates little.
type batchScratch struct {
	bufs  [][]byte
	xs    []xfer
	spans []span
	offs  []int
}

// release drops the references to the caller's memory.
func (b *batchScratch) release() {
	clear(b.bufs)
	clear(b.xs)
	b.bufs, b.xs, b.spans, b.offs = b.bufs[:0], b.xs[:0], b.spans[:0], b.offs[:0]
}

// runBatch checks, stages and runs ops.
func (c *Comm) runBatch(ctx context.Context, ops []P2POp) (err error) {
	if err := c.checkBatch(ops); err != nil {
		return err
	}
	sc := &c.batch
	defer sc.release()
	bufs := slices.Grow(sc.bufs, len(ops))[:len(ops)]
	sc.bufs = bufs
	var finishes []func(ok bool) error
	defer func() {
		for _, f := range finishes {
			err = cmp.Or(err, f(err == nil))
		}
	}()
	for i, o := range ops {
		n := o.Count * o.DType.Size()
		if o.Buf.Kind() == transport.Host {
			bufs[i] = o.Buf.Bytes()[:n]
			continue
		}
		// Device memory: each buffer is staged on its own, the sends before anything is
		// received, so a send carries its data from before the call.
		send, recv := o.Buf, Host(nil)
		if o.Recv {
			send, recv = recv, send
		}
		s, r, finish, err := c.hostBuffers(ctx, send, recv)
		if err != nil {
			return fmt.Errorf("goccl: rank %d: batch op %d (%s): %w", c.rank, i, o, err)
		}
		finishes = append(finishes, finish)
		if bufs[i] = s; o.Recv {
			bufs[i] = r
		}
		bufs[i] = bufs[i][:n]
	}
	// A send that shares memory with a receive goes out from a copy taken now.
	for i, o := range ops {
		if !o.Recv && ops[i].Buf.Kind() == transport.Host && c.receivesInto(bufs[i]) {
			tmp := algos.GetScratch(len(bufs[i]))
			defer algos.PutScratch(tmp)
			copy(tmp, bufs[i])
			bufs[i] = tmp
		}
	}
	xs := sc.xs
	selfRecv := 0 // the next receive from this rank itself
	for i, o := range ops {
		if o.Peer != c.rank {
			xs = c.p2pXfer(xs, o.Peer, o.Recv, KindSendRecv, o.Count, o.DType, bufs[i])
			continue
		}
		if !o.Recv { // checkBatch paired it with a receive of the same size
			for !ops[selfRecv].Recv || ops[selfRecv].Peer != c.rank {
				selfRecv++
			}
			copy(bufs[selfRecv], bufs[i])
			selfRecv++
		}
	}
	sc.xs = xs
	return c.runXfers(ctx, xs, true)
}

// checkBatch says what is wrong with ops, if anything, before anything is staged or
// sent.
func (c *Comm) checkBatch(ops []P2POp) error {
	var selfSends, selfRecvs []int
	for i := range ops {
		o := &ops[i]
		bad := func(format string, a ...any) error {
			return fmt.Errorf("goccl: rank %d: batch op %d (%s): %w: %s", c.rank, i, *o, transport.ErrInvalid, fmt.Sprintf(format, a...))
		}
		switch {
		case !o.DType.Valid():
			return bad("unknown dtype %d (valid: int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16)", o.DType)
		case o.Count < 0:
			return bad("negative count")
		case o.Peer < 0 || o.Peer >= c.size:
			return bad("peer %d outside the communicator (valid: 0..%d)", o.Peer, c.size-1)
		case o.Count > o.Buf.Len()/o.DType.Size():
			return bad("the buffer is %d bytes, need %d x %d-byte %s", o.Buf.Len(), o.Count, o.DType.Size(), o.DType)
		}
		if o.Peer == c.rank {
			if o.Recv {
				selfRecvs = append(selfRecvs, i)
			} else {
				selfSends = append(selfSends, i)
			}
		}
	}
	for k := range max(len(selfSends), len(selfRecvs)) {
		if k >= len(selfSends) || k >= len(selfRecvs) {
			return fmt.Errorf("goccl: rank %d: batch: %w: %d sends to this rank itself but %d receives from it (each pairs with the one in the same position)",
				c.rank, transport.ErrInvalid, len(selfSends), len(selfRecvs))
		}
		s, r := ops[selfSends[k]], ops[selfRecvs[k]]
		if s.Count != r.Count || s.DType != r.DType {
			return fmt.Errorf("goccl: rank %d: batch: %w: op %d (%s) pairs with op %d (%s): they must have the same count and dtype",
				c.rank, transport.ErrMismatch, selfSends[k], s, selfRecvs[k], r)
		}
	}
	return c.checkRecvsApart(ops)
}

// span is the memory of one receive: [lo, hi) in one address space (-1: the host's, else
// a CUDA device's).
type span struct {
	space  int
	lo, hi uintptr
	op     int
}

// recvSpans appends to sp the memory the receives of ops write, sorted.
func recvSpans(sp []span, ops []P2POp) []span {
	for i := range ops {
		o := &ops[i] // not a copy: see p2pXfer
		n := uintptr(o.Count * o.DType.Size())
		if !o.Recv || n == 0 {
			continue
		}
		s := span{space: -1, lo: o.Buf.Ptr(), op: i}
		if o.Buf.Kind() == transport.Host {
			s.lo = uintptr(unsafe.Pointer(unsafe.SliceData(o.Buf.Bytes())))
		} else {
			s.space = o.Buf.DeviceOrdinal()
		}
		s.hi = s.lo + n
		sp = append(sp, s)
	}
	slices.SortFunc(sp, func(a, b span) int { return cmp.Or(cmp.Compare(a.space, b.space), cmp.Compare(a.lo, b.lo)) })
	return sp
}

// checkRecvsApart refuses two receives that would write the same memory.
func (c *Comm) checkRecvsApart(ops []P2POp) error {
	sp := recvSpans(c.batch.spans[:0], ops)
	c.batch.spans = sp
	rank := c.rank
	for i := 1; i < len(sp); i++ {
		if a, b := sp[i-1], sp[i]; a.space == b.space && b.lo < a.hi {
			return fmt.Errorf("goccl: rank %d: batch: %w: op %d (%s) and op %d (%s) receive into the same memory",
				rank, transport.ErrInvalid, min(a.op, b.op), ops[min(a.op, b.op)], max(a.op, b.op), ops[max(a.op, b.op)])
		}
	}
	return nil
}

// receivesInto reports whether a receive of the batch checkBatch last checked writes
// any byte of p (host memory): a binary search of the spans checkRecvsApart sorted,
// which lie apart, so that their ends are in order too.
func (c *Comm) receivesInto(p []byte) bool {
	if len(p) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	sp := c.batch.spans
	// The first span past the host's that ends after lo.
	i := sort.Search(len(sp), func(i int) bool { return sp[i].space > -1 || sp[i].hi > lo })
	return i < len(sp) && sp[i].space == -1 && sp[i].lo < lo+uintptr(len(p))
}

// p2pXfer appends to xs the next message to or from peer on the point-to-point
// sequence the two ranks share (that of Send, Recv and SendRecv): count elements of dt
// in buf, of a SendRecv (a batch's) or an AllToAllV (kind), with the fingerprint
// call.fingerprint gives them (TestP2PXferFingerprint). It fills the new element
// field by field: an xfer or a fingerprint built and then copied in stalled the copy's
// wide loads on the narrow stores that built it, a fifth of a small batch's own time
// (BENCHMARKS.md, "Speed", 42a).
func (c *Comm) p2pXfer(xs []xfer, peer int, recv bool, kind Kind, count int, dt DType, buf []byte) []xfer {
	seq := &c.sendSeq[peer]
	if recv {
		seq = &c.recvSeq[peer]
	}
	*seq++
	xs = append(xs, xfer{})
	x := &xs[len(xs)-1]
	x.peer, x.recv, x.buf, x.h.Seq = peer, recv, buf, *seq
	f := &x.h.Fp
	f.Kind, f.DType, f.Op, f.Count, f.Root = kind, dt, Sum, uint64(count), -1
	return xs
}

// runXfers sends and receives xs and returns the first error.
//
// The receives run on the caller, one after another in the order of xs: a receive
// waits only for a peer's send, and no rank's sends wait for its own receives, so no
// order of them deadlocks, and one receive spins at a time. A send leaves first, from
// the caller, where the link takes it at once (transport.TrySender); the others go to
// goroutines that run beside the receives (laneWorkers). With byPeer there is one for
// each peer, its sends in order: a batch's ops may be in any order on each rank, and a
// send must not wait for another send's peer. Otherwise one goroutine takes them all
// in order: AllToAllV's pairwise schedule, in which rank r's k-th send is its peer's
// k-th receive, so that the peer reaches each one in turn; and when every one of those
// fits the links' eager size they go from the caller before its receives, as naive's
// AllToAll sends its small blocks. The first error ends the other lanes.
func (c *Comm) runXfers(ctx context.Context, xs []xfer, byPeer bool) error {
	key := func(x *xfer) int {
		switch {
		case x.recv:
			return c.size // one lane, last
		case byPeer:
			return x.peer
		}
		return 0
	}
	slices.SortStableFunc(xs, func(a, b xfer) int { return cmp.Compare(key(&a), key(&b)) })
	sends := make([][]xfer, 0, 8)
	var recvs []xfer
	eager := true
	for i := 0; i < len(xs); {
		j := i + 1
		for j < len(xs) && key(&xs[j]) == key(&xs[i]) {
			j++
		}
		l := xs[i:j]
		i = j
		if l[0].recv {
			recvs = l
			continue
		}
		for len(l) > 0 && c.trySend(l[0].peer, l[0].h, l[0].buf) {
			l = l[1:]
		}
		for _, x := range l {
			eager = eager && len(x.buf) <= c.eager
		}
		if len(l) > 0 {
			sends = append(sends, l)
		}
	}
	if len(sends) == 0 || !byPeer && eager {
		for _, l := range sends {
			if err := c.runLane(ctx, l); err != nil {
				return err
			}
		}
		return c.runLane(ctx, recvs)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := c.lanes.start(c, ctx, sends)
	// Let the senders start on this thread: it is their only one under GOMAXPROCS=1
	// (goccl run gives ranks that share cores one each), and a receive would spin
	// first.
	runtime.Gosched()
	err := c.runLane(ctx, recvs)
	if err != nil {
		cancel()
	}
	for range sends {
		if lerr := <-done; lerr != nil && err == nil {
			err = lerr
			cancel()
		}
	}
	return err
}

// laneWorkers are goroutines that run the sends of BatchSendRecv and AllToAllV beside
// the caller's receives, started when first needed and kept from call to call, as p2pHelper is
// for SendRecv: a goroutine per lane and call grew a fresh stack each time (a batch to
// and from both neighbours over tcp took 86 us at 3 ranks, Open MPI 19). Used under
// execMu.
type laneWorkers struct {
	jobs    chan laneJob
	done    chan error
	n       int
	stopped sync.WaitGroup
}

type laneJob struct {
	ctx  context.Context
	lane []xfer
}

// start hands lanes to the workers (starting more if fewer are idle) and returns the
// channel each lane's error (or nil) arrives on.
func (w *laneWorkers) start(c *Comm, ctx context.Context, lanes [][]xfer) <-chan error {
	if w.n < len(lanes) {
		if w.jobs == nil {
			// At most a lane a peer.
			w.jobs, w.done = make(chan laneJob, c.size), make(chan error, c.size)
		}
		for ; w.n < len(lanes); w.n++ {
			w.stopped.Go(func() {
				for j := range w.jobs {
					w.done <- c.runLane(j.ctx, j.lane)
				}
			})
		}
	}
	for _, l := range lanes {
		w.jobs <- laneJob{ctx, l}
	}
	return w.done
}

// stop ends the workers once no call uses them (Close, under execMu).
func (w *laneWorkers) stop() {
	if w.jobs != nil {
		close(w.jobs)
		w.stopped.Wait()
		w.jobs, w.n = nil, 0
	}
}

// runLane sends or receives l's messages in order.
func (c *Comm) runLane(ctx context.Context, l []xfer) error {
	for _, x := range l {
		if x.recv {
			if err := c.links[x.peer].Recv(ctx, x.h, x.buf); err != nil {
				return fmt.Errorf("goccl: rank %d: recv from rank %d: %w", c.rank, x.peer, err)
			}
		} else if err := c.links[x.peer].Send(ctx, x.h, x.buf); err != nil {
			return fmt.Errorf("goccl: rank %d: send to rank %d: %w", c.rank, x.peer, err)
		}
	}
	return nil
}
