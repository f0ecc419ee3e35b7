package goccl

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// AllToAllV sends a block of its own size to every rank: block j of send, sendCounts[j]
// elements at offset sendCounts[0] + ... + sendCounts[j-1], goes to rank j, and block i
// of recv, recvCounts[i] elements packed the same way, receives what rank i sent to this
// rank. It is torch.distributed's all_to_all_single with split sizes (MPI_Alltoallv with
// packed blocks), as a mixture-of-experts layer sends each token to its expert.
//
// sendCounts and recvCounts have one entry per rank; sendCounts[j] on rank i must equal
// recvCounts[i] on rank j (and sendCounts[i] recvCounts[i] on rank i itself). A rank
// whose counts disagree with a peer's fails with ErrMismatch, naming both counts, and
// the communicator fails on every rank. send and recv may share memory: what goes out
// is send as it was before the call. The blocks go in a pairwise schedule (at step d to
// rank+d and from rank-d), the sends beside the receives, or all sends first where each
// fits the links' eager size; where every link is NCCL's, as NCCL's grouped sends and
// receives.
func (c *Comm) AllToAllV(ctx context.Context, send Buffer, sendCounts []int, recv Buffer, recvCounts []int, dt DType) error {
	a, fresh := c.a2avHome.take()
	if fresh {
		a.home = &c.a2avHome
	}
	a.hold()
	op := a.spec(send, sendCounts, recv, recvCounts, dt)
	err := c.runSync(ctx, &op)
	a.release()
	return err
}

// AllToAllVAsync queues an AllToAllV. The count slices may be reused at once; the
// buffers only once the Work is done.
func (c *Comm) AllToAllVAsync(ctx context.Context, send Buffer, sendCounts []int, recv Buffer, recvCounts []int, dt DType) *Work {
	return c.submit(&Work{ctx: ctx, opSpec: new(allToAllV).spec(send, sendCounts, recv, recvCounts, dt)})
}

// allToAllV is one AllToAllV call, its counts copied (an asynchronous call's caller
// may reuse them), in the same allocation as the call up to a2avInline ranks. A
// blocking call's comes from the communicator's home and goes back to it (descHome).
type allToAllV struct {
	send, recv             Buffer
	sendCounts, recvCounts []int
	dt                     DType
	inline                 [2 * a2avInline]int
	holders
	home *descHome[allToAllV] // nil: a queued call's
}

// release lets one holder of a homed allToAllV go (descHome); the last clears the
// caller's buffers out of it and hands it back.
func (a *allToAllV) release() {
	if a.home != nil && a.drop() {
		a.send, a.recv, a.sendCounts, a.recvCounts = Buffer{}, Buffer{}, nil, nil
		a.home.spare.Store(a)
	}
}

const a2avInline = 8

func (a *allToAllV) String() string {
	return fmt.Sprintf("alltoallv %s send %s recv %s", a.dt, countsString(a.sendCounts), countsString(a.recvCounts))
}

func countsString(xs []int) string {
	const shown = 8
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range xs {
		if i == shown {
			fmt.Fprintf(&b, " ... %d more", len(xs)-shown)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, x)
	}
	b.WriteByte(']')
	return b.String()
}

// spec fills a in with the call's arguments, its counts copied, and returns the
// operation that runs it.
func (a *allToAllV) spec(send Buffer, sendCounts []int, recv Buffer, recvCounts []int, dt DType) opSpec {
	a.send, a.recv, a.dt = send, recv, dt
	counts := a.inline[:0]
	if len(sendCounts)+len(recvCounts) > len(a.inline) {
		counts = make([]int, 0, len(sendCounts)+len(recvCounts))
	}
	counts = append(append(counts, sendCounts...), recvCounts...)
	a.sendCounts, a.recvCounts = counts[:len(sendCounts):len(sendCounts)], counts[len(sendCounts):]
	bytes := 0
	if n, ok := total(a.sendCounts); ok && dt.Valid() && n <= math.MaxInt/dt.Size() {
		bytes = n * dt.Size()
	}
	return opSpec{ext: a, bytes: bytes}
}

func (a *allToAllV) failed() transport.Fingerprint {
	return transport.Fingerprint{Kind: transport.KindAllToAllV, DType: a.dt, Root: -1}
}

// total sums counts, reporting false for a negative entry or an overflow.
func total(counts []int) (int, bool) {
	n := 0
	for _, x := range counts {
		if x < 0 || x > math.MaxInt-n {
			return 0, false
		}
		n += x
	}
	return n, true
}

// checkAllToAllV says what is wrong with a, if anything, and returns the bytes each
// buffer needs.
func (c *Comm) checkAllToAllV(a *allToAllV) (sendN, recvN int, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("goccl: rank %d: alltoallv: %w: %s", c.rank, transport.ErrInvalid, fmt.Sprintf(format, args...))
	}
	if !a.dt.Valid() {
		return 0, 0, bad("unknown dtype %d (valid: int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16)", a.dt)
	}
	esz := a.dt.Size()
	need := func(name string, counts []int, b Buffer) (int, error) {
		if len(counts) != c.size {
			return 0, bad("%d %s counts, need one per rank (%d)", len(counts), name, c.size)
		}
		if i := slices.IndexFunc(counts, func(x int) bool { return x < 0 }); i >= 0 {
			return 0, bad("%s count for rank %d is negative (%d)", name, i, counts[i])
		}
		n, ok := total(counts)
		if !ok || n > math.MaxInt/esz {
			return 0, bad("the %s counts add up to more elements than memory holds", name)
		}
		if b.Len() < n*esz {
			return 0, bad("%s buffer is %d bytes, need %d (%d x %d-byte %s)", name, b.Len(), n*esz, n, esz, a.dt)
		}
		return n * esz, nil
	}
	if sendN, err = need("send", a.sendCounts, a.send); err != nil {
		return 0, 0, err
	}
	if recvN, err = need("recv", a.recvCounts, a.recv); err != nil {
		return 0, 0, err
	}
	if s, r := a.sendCounts[c.rank], a.recvCounts[c.rank]; s != r {
		return 0, 0, bad("this rank sends itself %d elements (sendCounts[%d]) but receives %d (recvCounts[%d]); they must be equal", s, c.rank, r, c.rank)
	}
	return sendN, recvN, nil
}

// runAllToAllV checks, stages and runs a as w: a block to and from every peer, on the
// point-to-point sequence of each pair, under its own kind so that it never matches a
// peer's Send or AllToAll; or, where every link is NCCL's, as NCCL's grouped calls.
func (c *Comm) runAllToAllV(ctx context.Context, w *Work, a *allToAllV) error {
	sendN, recvN, err := c.checkAllToAllV(a)
	if err != nil {
		return err
	}
	if c.offload != nil && c.offload.Offloads(transport.KindAllToAllV) {
		// Every link is NCCL's: its grouped sends and receives move the blocks, from
		// device memory where they are, whatever the algorithm spec says (AllToAllV has
		// no algorithm of its own); every rank decides alike.
		w.algo = offloadAlgo
		return c.offload.Offload(ctx, &transport.Collective{Kind: transport.KindAllToAllV, Send: a.send, Recv: a.recv,
			DType: a.dt, Root: -1, SendPeer: -1, RecvPeer: -1, SendCounts: a.sendCounts, RecvCounts: a.recvCounts})
	}
	s, r, finish, err := c.hostBuffers(ctx, a.send, a.recv)
	if err != nil {
		return fmt.Errorf("goccl: rank %d: alltoallv: %w", c.rank, err)
	}
	s, r = s[:sendN], r[:recvN]
	if sendN > 0 && recvN > 0 && !algos.Apart(s, r) {
		tmp := algos.GetScratch(sendN)
		defer algos.PutScratch(tmp)
		copy(tmp, s)
		s = tmp
	}
	defer c.batch.release()
	xs, selfSrc, selfDst := c.allToAllVXfers(a, s, r)
	copy(selfDst, selfSrc)
	err = c.runXfers(ctx, xs, false)
	if ferr := finish(err == nil); err == nil {
		err = ferr
	}
	return err
}

// allToAllVXfers numbers and returns a's messages, out of s and into r (host memory,
// sendN and recvN bytes), in the pairwise order (at step d rank r sends to r+d and
// receives from r-d), and the block this rank sends itself and where it goes. They are
// in the communicator's scratch (batchScratch), which the caller releases.
func (c *Comm) allToAllVXfers(a *allToAllV, s, r []byte) (xs []xfer, selfSrc, selfDst []byte) {
	esz := a.dt.Size()
	sc := &c.batch
	// so[p], ro[p]: where block p starts in s and r; so[w], ro[w]: their ends.
	offs := slices.Grow(sc.offs, 2*c.size+2)[:2*c.size+2]
	sc.offs = offs
	so, ro := offs[:c.size+1], offs[c.size+1:]
	so[0], ro[0] = 0, 0
	for p := range c.size {
		so[p+1], ro[p+1] = so[p]+a.sendCounts[p]*esz, ro[p]+a.recvCounts[p]*esz
	}
	xs = sc.xs
	for d := 1; d < c.size; d++ {
		p := (c.rank + d) % c.size
		xs = c.p2pXfer(xs, p, false, transport.KindAllToAllV, a.sendCounts[p], a.dt, s[so[p]:so[p+1]])
		q := (c.rank - d + c.size) % c.size
		xs = c.p2pXfer(xs, q, true, transport.KindAllToAllV, a.recvCounts[q], a.dt, r[ro[q]:ro[q+1]])
	}
	sc.xs = xs
	return xs, s[so[c.rank]:so[c.rank+1]], r[ro[c.rank]:ro[c.rank+1]]
}
