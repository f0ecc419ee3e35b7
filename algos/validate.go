package algos

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/goccl/goccl/transport"
)

// Validate checks one rank's Args against NCCL's conventions for a world of the given
// size and returns an error wrapping transport.ErrInvalid that says what is wrong and
// what would be right. On success it trims Send and Recv to exactly the bytes the
// collective uses (so the in-place AllGather idiom send = recv[rank*n:] works), and
// drops the buffers this rank does not use (Recv off the root for Reduce and Gather,
// Send off the root for Broadcast and Scatter), so no algorithm can touch them.
//
// Buffer lengths must be at least what count and dtype need; Send and Recv may be the
// same memory (in-place) or, for AllGather, ReduceScatter, Gather and Scatter, NCCL's
// offset alias, but not overlap any other way.
func Validate(a *Args, rank, world int) error {
	if a == nil {
		return fmt.Errorf("algos: %w: nil Args", transport.ErrInvalid)
	}
	if world < 1 {
		return fmt.Errorf("algos: %w: world of %d ranks; need at least 1", transport.ErrInvalid, world)
	}
	if rank < 0 || rank >= world {
		return fmt.Errorf("algos: %w: rank %d outside the world of %d ranks (valid 0..%d)",
			transport.ErrInvalid, rank, world, world-1)
	}
	k := a.Kind
	if !userKind(k) {
		return fmt.Errorf("algos: %w: %s is not a collective (valid: allreduce, reduce, broadcast, allgather, "+
			"reducescatter, gather, scatter, alltoall, barrier, sendrecv)", transport.ErrInvalid, k)
	}
	if k == transport.KindBarrier {
		a.Send, a.Recv = nil, nil
		return nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("algos: %s: "+format+": %w", append(append([]any{k}, args...), transport.ErrInvalid)...)
	}
	if !a.DType.Valid() {
		return fail("unknown dtype %d (valid: int8, uint8, int32, uint32, int64, uint64, float16, float32, "+
			"float64, bfloat16)", uint8(a.DType))
	}
	if reducing(k) && !a.Op.Valid() {
		return fail("unknown op %d (valid: sum, prod, max, min, avg)", uint8(a.Op))
	}
	if a.Count < 0 {
		return fail("count %d is negative", a.Count)
	}
	if a.ChunkBytes < 0 {
		return fail("chunk size %d bytes is negative (0 means the algorithm's default)", a.ChunkBytes)
	}
	esz := a.DType.Size()
	if overflows(a.Count, esz, world) {
		return fail("count %d x %d ranks x %d-byte %s overflows", a.Count, world, esz, a.DType)
	}
	n := a.Count * esz
	// The reasons are formatted only when a buffer is too small: this runs on every call.
	why := func(whole bool) string {
		if whole {
			return fmt.Sprintf("count %d x %d ranks x %d-byte %s", a.Count, world, esz, a.DType)
		}
		return fmt.Sprintf("count %d x %d-byte %s", a.Count, esz, a.DType)
	}
	if rooted(k) && (a.Root < 0 || a.Root >= world) {
		return fail("root %d out of range; valid 0..%d (world of %d ranks)", a.Root, world-1, world)
	}
	if k == transport.KindSendRecv {
		if err := checkPeers(a, rank, world, fail); err != nil {
			return err
		}
	}
	sendN, recvN, sendWhy, recvWhy, alias := need(k, n, world, rank, a.Root, a.SendPeer, a.RecvPeer)
	if sendN >= 0 && len(a.Send) < sendN {
		return fail("send buffer is %d bytes, need %d (%s)", len(a.Send), sendN, why(sendWhy))
	}
	if recvN >= 0 && len(a.Recv) < recvN {
		return fail("recv buffer is %d bytes, need %d (%s)", len(a.Recv), recvN, why(recvWhy))
	}
	if sendN < 0 {
		a.Send = nil
	} else {
		a.Send = a.Send[:sendN:sendN]
	}
	if recvN < 0 {
		a.Recv = nil
	} else {
		a.Recv = a.Recv[:recvN:recvN]
	}
	return checkOverlap(a, alias, rank, fail)
}

// need is what rank uses of Send and Recv in a call of kind over world ranks with n
// bytes per rank's part (Count x the element size), rooted at root (or SendRecv's
// peers): the bytes needed of each, -1 for a buffer it does not use; whether each need
// is the whole (world-sized) buffer, for Validate's message; and alias, the one allowed
// offset of Send from Recv for the offset-aliasing kinds (positive: Send inside Recv;
// negative: Recv inside Send), noAlias elsewhere.
func need(k transport.Kind, n, world, rank, root, sendPeer, recvPeer int) (sendN, recvN int, sendWhy, recvWhy bool, alias int) {
	const one, all = false, true
	isRoot := root == rank
	alias = noAlias
	switch k {
	case transport.KindAllReduce:
		sendN, recvN, sendWhy, recvWhy = n, n, one, one
	case transport.KindReduce:
		sendN, sendWhy, recvN = n, one, -1
		if isRoot {
			recvN, recvWhy = n, one
		}
	case transport.KindBroadcast:
		sendN, recvN, recvWhy = -1, n, one
		if isRoot {
			sendN, sendWhy = n, one
		}
	case transport.KindAllGather:
		sendN, recvN, sendWhy, recvWhy = n, world*n, one, all
		alias = rank * n
	case transport.KindReduceScatter:
		sendN, recvN, sendWhy, recvWhy = world*n, n, all, one
		alias = -rank * n
	case transport.KindGather:
		sendN, sendWhy, recvN = n, one, -1
		if isRoot {
			recvN, recvWhy, alias = world*n, all, rank*n
		}
	case transport.KindScatter:
		sendN, recvN, recvWhy = -1, n, one
		if isRoot {
			sendN, sendWhy, alias = world*n, all, -rank*n
		}
	case transport.KindAllToAll:
		sendN, recvN, sendWhy, recvWhy = world*n, world*n, all, all
	case transport.KindSendRecv:
		sendN, recvN, sendWhy, recvWhy = -1, -1, one, one
		if sendPeer >= 0 {
			sendN = n
		}
		if recvPeer >= 0 {
			recvN = n
		}
	}
	return sendN, recvN, sendWhy, recvWhy, alias
}

// Fit is Validate for a caller that only needs to know whether a collective's buffers
// plainly fit it, on every call (the communicator's two-rank fast paths): it formats
// nothing and changes no Args. It reports whether Validate would take a call of kind
// with count elements of dt (and op, for the reducing kinds) over world ranks rooted at
// root, and returns send and recv cut to what rank uses (nil for a buffer it does not
// use). A caller leaves anything it refuses to Validate, which says what is wrong. Not
// for Barrier or SendRecv.
func Fit(kind transport.Kind, count int, dt transport.DType, op transport.Op, world, rank, root int, send, recv []byte) (s, r []byte, ok bool) {
	esz := dt.Size()
	if !userKind(kind) || kind == transport.KindBarrier || kind == transport.KindSendRecv || !dt.Valid() ||
		reducing(kind) && !op.Valid() || count < 0 || rank < 0 || rank >= world || overflows(count, esz, world) ||
		rooted(kind) && (root < 0 || root >= world) {
		return nil, nil, false
	}
	sendN, recvN, _, _, alias := need(kind, count*esz, world, rank, root, -1, -1)
	if sendN >= 0 && len(send) < sendN || recvN >= 0 && len(recv) < recvN {
		return nil, nil, false
	}
	if sendN >= 0 {
		s = send[:sendN:sendN]
	}
	if recvN >= 0 {
		r = recv[:recvN:recvN]
	}
	return s, r, overlapOK(kind, s, r, alias, rank, -1)
}

// checkPeers validates SendRecv's peers: each is -1 (none) or a rank; a rank sending to
// itself must also receive from itself (the copy is local), and the reverse.
func checkPeers(a *Args, rank, world int, fail func(string, ...any) error) error {
	for _, p := range []struct {
		name string
		v    int
	}{{"send peer", a.SendPeer}, {"recv peer", a.RecvPeer}} {
		if p.v < -1 || p.v >= world {
			return fail("%s %d out of range; valid -1 (none) or 0..%d (world of %d ranks)", p.name, p.v, world-1, world)
		}
	}
	if (a.SendPeer == rank) != (a.RecvPeer == rank) {
		return fail("rank %d sends to rank %d but receives from rank %d; a send to self needs a receive from self",
			rank, a.SendPeer, a.RecvPeer)
	}
	return nil
}

// overlapOK reports whether send and recv are apart, or overlap as kind allows: at the
// same start for the same-start kinds (SendRecv only to itself), or send = recv + alias
// for the offset-aliasing kinds (checkOverlap).
func overlapOK(kind transport.Kind, send, recv []byte, alias, rank, sendPeer int) bool {
	if Apart(send, recv) {
		return true
	}
	s := uintptr(unsafe.Pointer(unsafe.SliceData(send)))
	r := uintptr(unsafe.Pointer(unsafe.SliceData(recv)))
	switch {
	case alias == noAlias:
		return s == r && (kind != transport.KindSendRecv || sendPeer == rank)
	case alias >= 0:
		return s == r+uintptr(alias)
	}
	return r == s+uintptr(-alias)
}

// noAlias marks kinds whose only in-place form is Send and Recv at the same start.
const noAlias = math.MinInt

// checkOverlap rejects Send and Recv that share memory in a way the collective does not
// define. Allowed: disjoint, the same start (in-place) for the same-start kinds, or
// Send = Recv + alias for the offset-aliasing kinds (alias >= 0: Send lies inside Recv;
// alias < 0: Recv inside Send).
func checkOverlap(a *Args, alias, rank int, fail func(string, ...any) error) error {
	if overlapOK(a.Kind, a.Send, a.Recv, alias, rank, a.SendPeer) {
		return nil
	}
	s := uintptr(unsafe.Pointer(unsafe.SliceData(a.Send)))
	r := uintptr(unsafe.Pointer(unsafe.SliceData(a.Recv)))
	want := "send and recv must be the same memory or disjoint"
	switch a.Kind {
	case transport.KindAllGather, transport.KindGather:
		want = fmt.Sprintf("in-place needs send = recv[%d:] (rank %d's block)", alias, rank)
	case transport.KindReduceScatter, transport.KindScatter:
		want = fmt.Sprintf("in-place needs recv = send[%d:] (rank %d's block)", -alias, rank)
	case transport.KindSendRecv:
		want = "send and recv must be disjoint unless the rank sends to itself"
	}
	return fail("send and recv overlap at offset %d; %s", int64(s)-int64(r), want)
}

// overflows reports whether count x esz x world (all positive but count, which is not
// negative) exceeds math.MaxInt; with multiplications, where two divisions cost tens of
// cycles on every call.
func overflows(count, esz, world int) bool {
	hi1, lo1 := bits.Mul64(uint64(count), uint64(esz))
	hi2, lo2 := bits.Mul64(lo1, uint64(world))
	return hi1 != 0 || hi2 != 0 || lo2 > math.MaxInt
}

func userKind(k transport.Kind) bool {
	for _, u := range transport.Kinds {
		if k == u {
			return true
		}
	}
	return false
}

// reducing reports whether kind combines data with an Op.
func reducing(k transport.Kind) bool {
	return k == transport.KindAllReduce || k == transport.KindReduce || k == transport.KindReduceScatter
}

// rooted reports whether kind has a root.
func rooted(k transport.Kind) bool {
	return k == transport.KindReduce || k == transport.KindBroadcast || k == transport.KindGather ||
		k == transport.KindScatter
}

// Bytes is the size of a call the way nccl-tests' size column and the selector's size
// ranges count it: the per-rank buffer for AllReduce, Reduce, Broadcast and SendRecv,
// and the whole world's data for AllGather (output), ReduceScatter (input), Gather,
// Scatter and AllToAll.
func Bytes(kind transport.Kind, count int, dt transport.DType, world int) int {
	n := count * dt.Size()
	switch kind {
	case transport.KindAllGather, transport.KindReduceScatter, transport.KindGather,
		transport.KindScatter, transport.KindAllToAll:
		return n * world
	case transport.KindBarrier:
		return 0
	}
	return n
}
