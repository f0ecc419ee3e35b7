//go:build linux

package shm

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/internal/relstore"
	"github.com/goccl/goccl/transport"
)

// conn is one end of a pair segment. Send runs on the out ring as its producer, Recv on
// the in ring as its consumer; each keeps its stream position privately and only
// publishes it through the ring's head or tail.
type conn struct {
	token    []byte // the auth token (nil: none); the creator checks the opener's proof
	commID   string
	seg      *segment
	self     int
	peer     int
	peerHost string
	side     int // 0 when this rank is the pair's lower rank
	opts     Options
	links    *atomic.Int32
	// streamSet is a Switch that overrides opts.StreamStores unless SwitchAuto (SetStreams).
	streamSet atomic.Uint32
	watch     *pidWatch
	peerPid   int
	out, in   *ring
	readv     func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error)
	epoch     time.Time
	desc      string
	attached  atomic.Bool // creator: the opener's pid has been checked
	samePid   bool        // the peer is another goroutine rank of this process

	// Sender state, touched only inside Send.
	head, tailSeen uint64
	scOff          bool   // the receiver refused single-copy once: stop trying
	pinned         []byte // the payload the peer may be reading (keeps it on the heap)
	reserved       bool   // a Reserve holds the sending guard until Commit or Abort
	resN           int    // the reserved payload's length
	resShown       int    // payload bytes published so far; -1 until the record is stamped
	resRec         [recordBytes]byte

	// Receiver state, touched only inside Recv and RecvStream.
	tail, headSeen uint64
	scratch        []byte
	rec            [recordBytes]byte // the private copy of the record being received

	sending, receiving int32 // an operation is inside the mapping (atomic; cleared by doneSending, doneReceiving)
	closed             atomic.Bool
	broken             atomic.Pointer[error]
	nextLiveness       atomic.Int64 // nanoseconds since epoch
	closeOnce          sync.Once
	mapMu              sync.RWMutex // held for writing while the segment is unmapped
	unmapped           bool
}

func newConn(e *endpoint, seg *segment, peer transport.PeerInfo, pid int) *conn {
	side := 0
	if e.local.Rank > peer.Rank {
		side = 1
	}
	c := &conn{
		seg: seg, self: e.local.Rank, peer: peer.Rank, peerHost: peer.Host, side: side,
		opts: e.opts, links: &e.links, watch: watchPid(pid), peerPid: pid, token: e.local.AuthToken, commID: e.local.CommID,
		out: seg.dir(side), in: seg.dir(1 - side), readv: processVMReadv, epoch: time.Now(),
	}
	c.attached.Store(!seg.creator)
	c.samePid = pid == os.Getpid()
	c.out.race, c.in.race = raceToken(seg.path, side), raceToken(seg.path, 1-side)
	e.links.Add(1)
	c.desc = fmt.Sprintf("shm rank %d <-> rank %d (pid %d) via %s, rings 2x%d KiB, chunk %d KiB, single-copy %s from %d B, stream stores %s",
		c.self, c.peer, pid, seg.path, seg.ring>>10, e.opts.ChunkBytes>>10, e.opts.SingleCopy, e.opts.SingleCopyMin, e.opts.StreamStores)
	return c
}

// Peer is the rank at the other end.
func (c *conn) Peer() int { return c.peer }

// EagerBytes is a quarter of the ring (transport.Eager): two such messages and their
// records always fit, so Send returns without the receiver. Single-copy messages wait
// for the receiver, so the bound stays below shm.single_copy_min when that is on.
func (c *conn) EagerBytes() int {
	n := c.seg.ring / 4
	if c.opts.SingleCopy != SingleCopyOff {
		n = min(n, c.opts.SingleCopyMin-1)
	}
	return n
}

// Describe says which segment and settings the link uses.
func (c *conn) Describe() string { return c.desc }

// Streams reports whether Send copies payloads into the ring with non-temporal stores:
// as SetStreams last said, else Options.Streams.
func (c *conn) Streams() bool {
	o := c.opts
	if s := Switch(c.streamSet.Load()); s != SwitchAuto {
		o.StreamStores = s
	}
	return o.Streams(int(c.links.Load()), c.samePid)
}

// SetStreams overrides Options.Streams for the link's later Sends (the communicator
// times both ways and picks; goccl's streamtune.go). Safe to call at any time.
func (c *conn) SetStreams(on bool) {
	s := SwitchOff
	if on {
		s = SwitchOn
	}
	c.streamSet.Store(uint32(s))
}

// Send copies payload into the ring chunk by chunk, publishing each chunk as soon as it
// is written; a payload of SingleCopyMin bytes or more is instead read by the receiver
// from this process's memory, and Send returns once it has been.
func (c *conn) Send(ctx context.Context, h transport.Header, payload []byte) error {
	if !atomic.CompareAndSwapInt32(&c.sending, 0, 1) {
		return fmt.Errorf("shm: send to rank %d: %w: concurrent Send calls on one link", c.peer, transport.ErrInvalid)
	}
	defer c.doneSending()
	if err := c.authenticated(ctx); err != nil {
		return err
	}
	if err := c.usable("send to", true); err != nil {
		return err
	}
	n := len(payload)
	var rec [recordBytes]byte
	f := transport.Frame{Header: h, Len: uint64(n)}
	f.Encode(rec[:])
	if n <= inlineMax {
		copy(rec[recInline:], payload)
		if err := c.waitSpace(ctx, recordBytes); err != nil {
			return c.opErr("send to", err)
		}
		// The consumer reads an inline record by its stamp alone, so head is not
		// stored (a later data message's publish covers it): one fenced store less
		// per small message. A consumer asleep on the ring is still woken.
		c.out.putRecord(c.head, &rec, kindInline)
		c.head += recordBytes
		c.out.wakeConsumer()
		return nil
	}
	if n <= shortMax {
		need := uint64(recordBytes + pad(n))
		if err := c.waitSpace(ctx, need); err != nil {
			return c.opErr("send to", err)
		}
		c.out.put(c.head+recordBytes, payload, false)
		c.out.putRecord(c.head, &rec, kindShort) // after the payload (see ring)
		c.head += need
		c.out.wakeConsumer()
		return nil
	}
	if c.opts.SingleCopy != SingleCopyOff && !c.scOff && n >= c.opts.SingleCopyMin {
		done, err := c.sendSingle(ctx, rec, payload)
		if err != nil || done {
			return err
		}
	}
	return c.sendRing(ctx, rec, payload)
}

// TrySend sends payload only when it goes with its record (up to shortMax bytes) and
// the ring has room for it now (transport.TrySender): then it does what Send does for
// such a message, and nothing can make it wait, except that the record's stamp is a
// release store rather than a fenced one and the receiver is woken by Flush. A fence
// right after the stamp would hold this core until the line the peer polls is its own
// again; without it the caller's next work overlaps that transfer (the two-rank 8-byte
// AllReduce 0.50 to 0.48 us, BENCHMARKS.md, "Speed", 25).
func (c *conn) TrySend(h transport.Header, payload []byte) (bool, error) {
	n := len(payload)
	if n > shortMax || len(c.token) > 0 && !c.attached.Load() {
		return false, nil
	}
	if !atomic.CompareAndSwapInt32(&c.sending, 0, 1) {
		return false, nil // another Send is in the mapping: let the caller's Send report it
	}
	defer c.doneSending()
	if err := c.usable("send to", true); err != nil {
		return false, err
	}
	need, kind := uint64(recordBytes), byte(kindInline)
	if n > inlineMax {
		need, kind = uint64(recordBytes+pad(n)), kindShort
	}
	if !c.fits(need) && !c.refits(need) {
		return false, nil
	}
	// Straight into the ring (no record on the stack to copy): the consumer reads
	// nothing of it before the stamp, stored last.
	rec := c.out.data[c.head&c.out.mask:][:recordBytes]
	f := transport.Frame{Header: h, Len: uint64(n)}
	f.Encode(rec)
	if kind == kindInline {
		copy(rec[recInline:], payload)
	} else {
		c.out.put(c.head+recordBytes, payload, false)
	}
	raceRelease(c.out.race)
	relstore.Uint64(c.out.stampWord(c.head), stamp(c.head, kind))
	c.head += need
	return true, nil
}

// Flush wakes a receiver asleep on the ring after TrySend (transport.TrySender). The
// guard's compare-and-swap is the fence between TrySend's stamp and the read of the
// receiver's waiting flag (the eventcount's hand-shake, see ring), and it keeps Close
// from unmapping the ring under the read. When another Send is inside the mapping,
// that one's own wake-up covers the stamp.
func (c *conn) Flush() {
	if !atomic.CompareAndSwapInt32(&c.sending, 0, 1) {
		return
	}
	if !c.closed.Load() {
		c.out.wakeConsumer()
	}
	c.doneSending()
}

func (c *conn) sendRing(ctx context.Context, rec [recordBytes]byte, payload []byte) error {
	n := len(payload)
	padded := uint64(pad(n))
	chunk := uint64(c.opts.ChunkBytes)
	pending := uint64(recordBytes) // written after head but not yet published
	if err := c.waitSpace(ctx, pending); err != nil {
		return c.opErr("send to", err)
	}
	c.out.putRecord(c.head, &rec, kindData)
	stream := c.Streams()
	for off := uint64(0); off < padded; {
		want := min(chunk, padded-off)
		if err := c.waitSpace(ctx, pending+want); err != nil {
			if off == 0 {
				return c.opErr("send to", err) // nothing published: the link stays usable
			}
			return c.giveUp(ctx, c.opErr("send to", err))
		}
		if end := min(off+want, uint64(n)); end > off {
			c.out.put(c.head+pending, payload[off:end], stream)
		}
		off += want
		c.head += pending + want
		pending = 0
		c.out.publish(c.head)
	}
	return nil
}

// sendSingle posts payload's address and waits for the receiver's ack. It reports
// done=false when the receiver's kernel refused and the payload must go through the ring.
func (c *conn) sendSingle(ctx context.Context, rec [recordBytes]byte, payload []byte) (done bool, err error) {
	binary.LittleEndian.PutUint64(rec[recAddr:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(payload)))))
	if err := c.waitSpace(ctx, recordBytes); err != nil {
		return false, c.opErr("send to", err)
	}
	// Storing the slice in the conn makes payload escape, so it is on the heap (which
	// does not move) and not on a stack (which does) while the peer reads it.
	c.pinned = payload
	defer func() { c.pinned = nil }()
	c.out.putRecord(c.head, &rec, kindSingle)
	c.head += recordBytes
	c.out.publish(c.head)
	target := c.head
	tail := c.out.tail
	if err := c.await(ctx, func() bool { return atomic.LoadUint64(tail) >= target }, c.out.spaceSeq, c.out.prodWaiting); err != nil {
		// The peer may be reading payload right now and the caller may reuse it once we
		// return: failing the link sets our closed flag, which the receiver checks
		// after its read, so it discards what it read instead of delivering it.
		return false, c.fail(c.opErr("send to", err))
	}
	c.tailSeen = target
	runtime.KeepAlive(payload)
	switch atomic.LoadUint32(c.out.scStatus) {
	case scDone:
		return true, nil
	case scRefused:
		c.scOff = true
		return false, nil
	}
	return false, c.fail(fmt.Errorf("shm: send to rank %d: %w: the receiver's kernel refuses process_vm_readv and shm.single_copy=true",
		c.peer, transport.ErrNotSupported))
}

// waitSpace waits until need bytes after head are free.
func (c *conn) waitSpace(ctx context.Context, need uint64) error {
	if c.fits(need) {
		return nil
	}
	return c.await(ctx, func() bool { return c.refits(need) }, c.out.spaceSeq, c.out.prodWaiting)
}

// fits reports whether need bytes after head are free by the tail last seen.
func (c *conn) fits(need uint64) bool { return c.out.size-(c.head-c.tailSeen) >= need }

// refits is fits after reading the consumer's tail again.
func (c *conn) refits(need uint64) bool {
	c.tailSeen = atomic.LoadUint64(c.out.tail)
	return c.fits(need)
}

// waitData waits until at least need payload bytes after tail are published and
// returns how many are. (headSeen may lag tail: records are read by their stamps.)
func (c *conn) waitData(ctx context.Context, need uint64) (uint64, error) {
	if c.headSeen >= c.tail+need {
		return c.headSeen - c.tail, nil
	}
	head := c.in.head
	err := c.await(ctx, func() bool {
		c.headSeen = atomic.LoadUint64(head)
		return c.headSeen >= c.tail+need
	}, c.in.dataSeq, c.in.consWaiting)
	raceAcquire(c.in.race)
	if c.headSeen < c.tail {
		return 0, err
	}
	return c.headSeen - c.tail, err
}

// waitRecord waits until the record at tail is complete (its stamp is stored) and
// returns its kind.
func (c *conn) waitRecord(ctx context.Context) (byte, error) {
	word := c.in.stampWord(c.tail)
	want := stamp(c.tail, 0) >> 8
	var got uint64
	err := c.await(ctx, func() bool {
		got = atomic.LoadUint64(word)
		return got>>8 == want
	}, c.in.dataSeq, c.in.consWaiting)
	raceAcquire(c.in.race)
	return byte(got), err
}

// await polls ready, then sleeps on the seq futex in livenessEvery slices, checking
// between slices that the link, the context and the peer process are still alive.
//
// The poll has two phases. For pureSpin it only reloads the word, pollPause PAUSEs
// apart: a peer running on the other core answers within that, and a system call would
// only delay us. After that, and from the start when ranks outnumber cores, every poll
// first yields the CPU (sched_yield, and runtime.Gosched too when the peer is a
// goroutine of this process, or every yieldGosched polls when this process has one P;
// otherwise Gosched would only wake an idle thread of our
// runtime) until opts.Spin is over. Spinning without yielding is what made small messages slow on a busy
// machine: the kernel often wakes the peer on the spinning rank's core, where it then
// waits for the spinner's time slice to end, so the round trip grew with the spin
// (150 µs at shm.spin=50us, 720 µs at 1ms, against 9 µs without spinning; see
// BENCHMARKS.md, "Speed"). A yielding poll hands that core over at once and still keeps the
// CPU from going idle, whose wake-up costs 25-50 µs in a VM.
func (c *conn) await(ctx context.Context, ready func() bool, seq, waiting *uint32) error {
	if ready() {
		return nil
	}
	if c.opts.Spin > 0 {
		yield := c.opts.oversubscribed(int(c.links.Load()), c.samePid)
		// With one P (a launcher's GOMAXPROCS=1 per rank), a polling goroutine would
		// keep this rank's other goroutines (the pipeline's other side, the work they
		// wait for) off the CPU until the spin ends; let them run between polls. No
		// idle P exists to be woken, so it costs no thread wake-up. Not for the first
		// 64 polls: a Gosched costs about 200 ns here (the scheduler reads the clock
		// for its timers), and a peer on the other core usually answers within them
		// (8-byte round trip 460-870 ns with a Gosched every 8 polls, 320-360 without
		// one in the first 64: BenchmarkPingPong8BProc, GOMAXPROCS=1). While yielding
		// to a peer process, a Gosched every yieldGosched polls: one per poll put 200 ns
		// of scheduler beside every sched_yield (8 B at 4 ranks on 2 cores: 7.7-9.5 us
		// against 9.4-10.8 with one per poll, BENCHMARKS.md, "Speed", 15); a peer
		// goroutine gets one at every poll, since it needs this P to answer.
		gosched := c.samePid || runtime.GOMAXPROCS(0) == 1
		var start time.Time // read at the first check: most waits end before it
		for i := 1; ; i++ {
			if !yield {
				procyield(pollPause)
			}
			if ready() {
				return nil
			}
			if gosched && ((yield && (c.samePid || i%yieldGosched == 0)) || (i >= 64 && i%8 == 0)) {
				runtime.Gosched()
			}
			if start.IsZero() && (yield || i%64 == 0) {
				start = time.Now()
			}
			if yield {
				osYield()
			} else if i%64 == 0 && time.Since(start) > pureSpin {
				yield = true
			}
			if yield || i%64 == 0 {
				if c.closed.Load() || c.broken.Load() != nil || ctx.Err() != nil ||
					atomic.LoadUint32(c.seg.closedWord(1-c.side)) != 0 || time.Since(start) > c.opts.Spin {
					break
				}
			}
		}
	}
	if ctx.Done() != nil {
		// The callback may still run after await returns (stop does not wait for it),
		// so it must not touch a mapping that Close has removed meanwhile.
		stop := context.AfterFunc(ctx, func() {
			c.mapMu.RLock()
			defer c.mapMu.RUnlock()
			if !c.unmapped {
				atomic.AddUint32(seq, 1)
				futexWake(seq)
			}
		})
		defer stop()
	}
	for {
		v := atomic.LoadUint32(seq)
		atomic.StoreUint32(waiting, 1)
		if ready() {
			atomic.StoreUint32(waiting, 0)
			return nil
		}
		if err := c.check(ctx); err != nil {
			atomic.StoreUint32(waiting, 0)
			if ready() { // what the peer published before it left still counts
				return nil
			}
			return err
		}
		futexWait(seq, v, livenessEvery)
	}
}

// usable fails fast when the link is closed, broken or (for sends) abandoned by the peer.
func (c *conn) usable(what string, sending bool) error {
	if c.closed.Load() {
		return fmt.Errorf("shm: %s rank %d: %w", what, c.peer, transport.ErrClosed)
	}
	if p := c.broken.Load(); p != nil {
		return *p
	}
	if sending && atomic.LoadUint32(c.seg.closedWord(1-c.side)) != 0 {
		return c.peerClosed()
	}
	return nil
}

// check is the slow-path test run between futex sleeps.
func (c *conn) check(ctx context.Context) error {
	if err := c.usable("wait for", false); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return ctxErr(ctx, err)
	}
	if atomic.LoadUint32(c.seg.closedWord(1-c.side)) != 0 {
		return c.peerClosed()
	}
	if !c.attached.Load() {
		switch atomic.LoadUint32(c.seg.u32(hAttach)) {
		case attachRejected:
			return c.fail(fmt.Errorf("shm: rank %d: %w: rank %d rejected segment %s (see its error)",
				c.self, transport.ErrProtocol, c.peer, c.seg.path))
		case attachOK:
			if p := int(atomic.LoadUint32(c.seg.u32(hOpenerPid))); p != c.peerPid {
				return c.fail(fmt.Errorf("shm: rank %d: %w: segment %s was attached by pid %d, but rank %d's handle names pid %d",
					c.self, transport.ErrProtocol, c.seg.path, p, c.peer, c.peerPid))
			}
			if err := c.seg.checkOpener(c.token, c.commID, c.self, c.peer, c.peerPid); err != nil {
				return c.fail(err)
			}
			c.attached.Store(true)
		}
	}
	now := int64(time.Since(c.epoch))
	if next := c.nextLiveness.Load(); now >= next && c.nextLiveness.CompareAndSwap(next, now+int64(livenessEvery)) {
		if !c.watch.alive() {
			return c.fail(&transport.PeerError{Peer: c.peer, Host: c.peerHost,
				Err: fmt.Errorf("shm: process %d exited: %w", c.peerPid, transport.ErrClosed)})
		}
	}
	return nil
}

func (c *conn) peerClosed() error {
	return &transport.PeerError{Peer: c.peer, Host: c.peerHost, Err: fmt.Errorf("shm: link closed by peer: %w", transport.ErrClosed)}
}

// opErr adds context to an error from a wait; errors that already name the peer or
// the link pass through unchanged.
func (c *conn) opErr(what string, err error) error {
	switch err.(type) {
	case *transport.PeerError, *transport.MismatchError:
		return err
	}
	if p := c.broken.Load(); p != nil && *p == err {
		return err
	}
	return fmt.Errorf("shm: %s rank %d: %w", what, c.peer, err)
}

// fail marks the link unusable for both sides and returns err: later calls return it,
// and the peer's blocked calls wake up and see this side gone.
func (c *conn) fail(err error) error {
	c.broken.CompareAndSwap(nil, &err)
	atomic.StoreUint32(c.seg.closedWord(c.side), 1)
	if c.seg.creator && atomic.LoadUint32(c.seg.u32(hAttach)) != attachOK {
		c.seg.unlink() // the peer never mapped it: do not leave it behind
	}
	c.out.wake()
	c.in.wake()
	return err
}

// giveUp is fail for a message stopped half-way because this side gave up (its context
// ended: its operation failed elsewhere, or its caller cancelled it). The link is
// broken for this side at once, and the peer is told giveUpGrace later: the peer would
// take the closed link for this rank's failure, and could reach the communicator's
// record of the cause first (goccl's agreeCause), naming this rank (a batch's send to a
// live neighbour, cut when the other neighbour died: RELIABILITY.md). tcp's links wait
// as long (tcp/state.go).
func (c *conn) giveUp(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return c.fail(err)
	}
	c.broken.CompareAndSwap(nil, &err)
	time.AfterFunc(giveUpGrace, func() {
		c.mapMu.RLock()
		defer c.mapMu.RUnlock()
		if !c.unmapped {
			c.fail(err)
		}
	})
	return err
}

// giveUpGrace is how long giveUp waits before the peer is told: far longer than a
// store round trip, far shorter than any timeout.
const giveUpGrace = 25 * time.Millisecond

// Close marks this side gone, wakes every waiter on both sides, waits for this side's
// calls to leave the mapping, and unmaps it. A segment the peer never attached is
// removed here.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		atomic.StoreUint32(c.seg.closedWord(c.side), 1)
		c.out.wake()
		c.in.wake()
		// Blocked calls notice within one futex slice. If one does not leave (a Close
		// from inside a RecvStream callback), keep the mapping rather than crash it.
		deadline := time.Now().Add(time.Second)
		for atomic.LoadInt32(&c.sending) != 0 || atomic.LoadInt32(&c.receiving) != 0 {
			if time.Now().After(deadline) {
				c.watch.close()
				c.links.Add(-1)
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
		if c.seg.creator && atomic.LoadUint32(c.seg.u32(hAttach)) != attachOK {
			c.seg.unlink()
		}
		c.mapMu.Lock()
		c.unmapped = true
		c.seg.unmap()
		c.mapMu.Unlock()
		raceForget(c.seg.path)
		c.watch.close()
		c.links.Add(-1)
	})
	return nil
}

// doneSending and doneReceiving end a Send or Recv. A release store, not a fenced one:
// everything the call did in the mapping is visible before the flag is (what Close waits
// for), and the core does not stall on the record it has just written into a line the
// peer polls (BENCHMARKS.md, "Speed", 22).
func (c *conn) doneSending()   { relstore.Int32(&c.sending, 0) }
func (c *conn) doneReceiving() { relstore.Int32(&c.receiving, 0) }
