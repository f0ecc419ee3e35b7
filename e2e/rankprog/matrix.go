package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/goccl/goccl"
)

// mcase is one collective call of the matrix, identical on every rank.
type mcase struct {
	kind    goccl.Kind
	dt      goccl.DType
	op      goccl.Op
	count   int // NCCL's count: per rank for allgather, reducescatter, gather, scatter, alltoall
	root    int
	inPlace bool
	seed    uint64
}

func (c mcase) String() string {
	s := fmt.Sprintf("%s %s", c.kind, c.dt)
	if reducingKind(c.kind) {
		s += " " + c.op.String()
	}
	s += fmt.Sprintf(" count=%d", c.count)
	if rootedKind(c.kind) {
		s += fmt.Sprintf(" root=%d", c.root)
	}
	if c.inPlace {
		s += " in-place"
	}
	return s
}

func reducingKind(k goccl.Kind) bool {
	return k == goccl.KindAllReduce || k == goccl.KindReduce || k == goccl.KindReduceScatter
}

func rootedKind(k goccl.Kind) bool {
	return k == goccl.KindReduce || k == goccl.KindBroadcast || k == goccl.KindGather || k == goccl.KindScatter
}

// inPlaceKind reports whether NCCL defines an in-place form of k.
func inPlaceKind(k goccl.Kind) bool {
	return k != goccl.KindAllToAll && k != goccl.KindBarrier && k != goccl.KindSendRecv
}

// largeCount is the count of the large case: the biggest buffer of the call holds at
// least 4M elements, and the count is not divisible by the world size.
func largeCount(k goccl.Kind, world int) int {
	const big = 4 << 20
	switch k {
	case goccl.KindAllGather, goccl.KindReduceScatter, goccl.KindGather, goccl.KindScatter, goccl.KindAllToAll:
		return big/world + 1
	}
	n := big + 1
	for n%world == 0 {
		n++
	}
	return n
}

// plan lists the matrix's calls for one rank: every kind x dtype x op (reducing kinds)
// x count, roots rotating, in-place on every other call where defined, plus one large
// case per kind listed in large.
func plan(kinds []goccl.Kind, dts []goccl.DType, ops []goccl.Op, counts []int, large map[goccl.Kind]bool, world int) []mcase {
	var out []mcase
	n := 0
	add := func(c mcase) {
		n++
		c.seed = uint64(n)
		c.root = n % world
		c.inPlace = inPlaceKind(c.kind) && n%2 == 1
		out = append(out, c)
	}
	for _, k := range kinds {
		if k == goccl.KindBarrier {
			add(mcase{kind: k, dt: goccl.Uint8})
			add(mcase{kind: k, dt: goccl.Uint8})
			continue
		}
		kops := ops
		if !reducingKind(k) {
			kops = []goccl.Op{goccl.Sum}
		}
		for _, dt := range dts {
			for _, op := range kops {
				for _, cnt := range counts {
					add(mcase{kind: k, dt: dt, op: op, count: cnt})
				}
			}
		}
		if large[k] {
			dt, op := goccl.Float32, goccl.Sum
			if k == goccl.KindReduceScatter || k == goccl.KindReduce {
				dt, op = goccl.BFloat16, goccl.Avg // exercise the 16-bit path at size too
			}
			add(mcase{kind: k, dt: dt, op: op, count: largeCount(k, world)})
		}
	}
	return out
}

// buffers holds one rank's buffers for a call and where its result lands.
type buffers struct {
	send, recv goccl.Buffer
	sendBytes  []byte // the backing arrays, to check and to compare after the call
	out        []byte // where the result lands, nil when this rank receives nothing
	input      []byte // a copy of this rank's input, to check an out-of-place send is untouched
}

const garbage = 0xa5

// arena hands out a call's buffers from memory this rank got from AllocShared, so that
// collectives can read them in place (-shared). Each call starts from the arena's start;
// a rank's offsets follow its own buffers' sizes, so they differ across ranks in the
// rooted kinds, which the direct algorithm must cope with.
type arena struct {
	mem []byte
	off int
}

// take returns n bytes of the arena (64-byte aligned), or fresh memory when it is full
// or absent.
func (a *arena) take(n int) []byte {
	if a == nil || a.off+n > len(a.mem) {
		return make([]byte, n)
	}
	b := a.mem[a.off : a.off+n : a.off+n]
	a.off = (a.off + n + 63) &^ 63
	return b
}

// arenaBytes holds the largest plan's two buffers: the large case's 4M elements of
// float32 (16 MiB, or W times a 16/W MiB block), send and receive.
const arenaBytes = 2*(16<<20+64<<10) + 4096

// build allocates rank r's buffers for c, in NCCL's in-place or out-of-place form.
func build(c mcase, r, w int, ar *arena) buffers {
	if ar != nil {
		ar.off = 0
	}
	red := reducingKind(c.kind)
	esz := c.dt.Size()
	n := c.count * esz
	in := func(elems int) []byte {
		b := ar.take(elems * esz)
		for i := range elems {
			put(c.dt, b, i, value(c.dt, c.op, red, c.seed, r, i))
		}
		return b
	}
	outb := func(size int) []byte {
		b := ar.take(size)
		for i := range b {
			b[i] = garbage
		}
		return b
	}
	var s, rv []byte
	var out []byte
	isRoot := r == c.root
	switch c.kind {
	case goccl.KindBarrier:
		return buffers{send: goccl.Host(nil), recv: goccl.Host(nil)}
	case goccl.KindAllReduce:
		s = in(c.count)
		rv = outb(n)
		if c.inPlace {
			rv = s
		}
		out = rv
	case goccl.KindReduce:
		s = in(c.count)
		if isRoot {
			rv = outb(n)
			if c.inPlace {
				rv = s
			}
			out = rv
		}
	case goccl.KindBroadcast:
		rv = outb(n)
		if isRoot {
			s = in(c.count)
			if c.inPlace {
				rv = s
			}
		}
		out = rv
	case goccl.KindAllGather, goccl.KindGather:
		s = in(c.count)
		if c.kind == goccl.KindAllGather || isRoot {
			rv = outb(w * n)
			out = rv
			if c.inPlace {
				copy(rv[r*n:], s)
				s = rv[r*n : (r+1)*n]
			}
		}
	case goccl.KindReduceScatter, goccl.KindScatter:
		rv = outb(n)
		out = rv
		if c.kind == goccl.KindReduceScatter || isRoot {
			s = in(w * c.count)
			if c.inPlace {
				rv = s[r*n : (r+1)*n]
				out = rv
			}
		}
	case goccl.KindAllToAll:
		s = in(w * c.count)
		rv = outb(w * n)
		out = rv
	case goccl.KindSendRecv:
		s = in(c.count)
		rv = outb(n)
		out = rv
	}
	b := buffers{send: goccl.Host(s), recv: goccl.Host(rv), sendBytes: s, out: out}
	if !c.inPlace && s != nil {
		b.input = append([]byte(nil), s...)
	}
	return b
}

// issue runs c on comm with b's buffers.
func issue(ctx context.Context, comm *goccl.Comm, c mcase, b buffers) error {
	w, r := comm.Size(), comm.Rank()
	switch c.kind {
	case goccl.KindAllReduce:
		return comm.AllReduce(ctx, b.send, b.recv, c.count, c.dt, c.op)
	case goccl.KindReduce:
		return comm.Reduce(ctx, b.send, b.recv, c.count, c.dt, c.op, c.root)
	case goccl.KindBroadcast:
		return comm.Broadcast(ctx, b.send, b.recv, c.count, c.dt, c.root)
	case goccl.KindAllGather:
		return comm.AllGather(ctx, b.send, b.recv, c.count, c.dt)
	case goccl.KindReduceScatter:
		return comm.ReduceScatter(ctx, b.send, b.recv, c.count, c.dt, c.op)
	case goccl.KindGather:
		return comm.Gather(ctx, b.send, b.recv, c.count, c.dt, c.root)
	case goccl.KindScatter:
		return comm.Scatter(ctx, b.send, b.recv, c.count, c.dt, c.root)
	case goccl.KindAllToAll:
		return comm.AllToAll(ctx, b.send, b.recv, c.count, c.dt)
	case goccl.KindBarrier:
		return comm.Barrier(ctx)
	case goccl.KindSendRecv:
		if w == 1 {
			copy(b.out, b.sendBytes)
			return nil
		}
		return comm.SendRecv(ctx, b.send, (r+1)%w, b.recv, (r-1+w)%w, c.count, c.dt)
	}
	return fmt.Errorf("rankprog: kind %s not handled", c.kind)
}

// expected returns element i of block j of rank r's output (blocks of c.count elements).
func expected(c mcase, r, w, j, i int) elem {
	red := reducingKind(c.kind)
	v := func(rank, idx int) elem { return value(c.dt, c.op, red, c.seed, rank, idx) }
	reduced := func(idx int) elem {
		xs := make([]elem, w)
		for q := range w {
			xs[q] = v(q, idx)
		}
		return combine(c.dt, c.op, xs)
	}
	switch c.kind {
	case goccl.KindAllReduce, goccl.KindReduce:
		return reduced(i)
	case goccl.KindReduceScatter:
		return reduced(r*c.count + i)
	case goccl.KindBroadcast:
		return v(c.root, i)
	case goccl.KindAllGather, goccl.KindGather:
		return v(j, i)
	case goccl.KindScatter:
		return v(c.root, r*c.count+i)
	case goccl.KindAllToAll:
		return v(j, r*c.count+i)
	case goccl.KindSendRecv:
		return v((r-1+w)%w, i)
	}
	return elem{}
}

// verify checks rank r's output of c against the serial reference and that an
// out-of-place send buffer was left alone. It returns "" or what was wrong.
func verify(c mcase, r, w int, b buffers) string {
	if b.out == nil || c.kind == goccl.KindBarrier {
		return ""
	}
	esz := c.dt.Size()
	blocks := len(b.out) / max(1, c.count*esz)
	if c.count == 0 {
		blocks = 0
	}
	var bad []string
	nbad := 0
	for j := range blocks {
		for i := range c.count {
			want := expected(c, r, w, j, i)
			got := get(c.dt, b.out, j*c.count+i)
			if !same(c.dt, c.op, reducingKind(c.kind), want, got) {
				nbad++
				if len(bad) < 3 {
					bad = append(bad, fmt.Sprintf("block %d element %d: got %v want %v", j, i, show(c.dt, got), show(c.dt, want)))
				}
			}
		}
	}
	if b.input != nil && string(b.input) != string(b.sendBytes) {
		bad = append(bad, "the send buffer changed in an out-of-place call")
		nbad++
	}
	if nbad == 0 {
		return ""
	}
	return fmt.Sprintf("%d wrong: %s", nbad, strings.Join(bad, "; "))
}

func show(dt goccl.DType, e elem) string {
	if dt.IsFloat() {
		return fmt.Sprint(e.f)
	}
	if signed(dt) {
		return fmt.Sprint(sext(dt, e.u))
	}
	return fmt.Sprint(e.u)
}

// runMatrix runs the plan and prints one line per wrong call and a summary; the exit
// status is non-zero if anything was wrong or failed.
func runMatrix(ctx context.Context, comm *goccl.Comm, cases []mcase, corrupt, shared bool) int {
	r, w := comm.Rank(), comm.Size()
	var ar *arena
	if shared {
		mem, err := comm.AllocShared(ctx, arenaBytes)
		if err != nil {
			fmt.Printf("MATRIX-ERROR rank=%d case=\"AllocShared\" err=%q\n", r, err.Error())
			return 1
		}
		defer comm.FreeShared(ctx, mem)
		ar = &arena{mem: mem}
	}
	var links []string
	for p := range w {
		links = append(links, fmt.Sprintf("%d:%s", p, comm.TransportOf(p)))
	}
	fmt.Printf("LINKS rank=%d host=%s %s\n", r, comm.Host(), strings.Join(links, " "))
	bad := 0
	for _, c := range cases {
		b := build(c, r, w, ar)
		if err := issue(ctx, comm, c, b); err != nil {
			fmt.Printf("MATRIX-ERROR rank=%d case=%q err=%q\n", r, c.String(), err.Error())
			return 1
		}
		if corrupt && len(b.out) > 0 {
			b.out[(len(b.out)-1)/2] ^= 0x10
		}
		if msg := verify(c, r, w, b); msg != "" {
			bad++
			fmt.Printf("MATRIX-WRONG rank=%d case=%q algo=%q %s\n", r, c.String(), algoOf(comm, c), msg)
		}
	}
	st := comm.Stats()
	fmt.Printf("MATRIX rank=%d calls=%d bad=%d direct=%d staged=%d\n", r, len(cases), bad, st.ByAlgo["direct"].Calls, st.ByAlgo["staged"].Calls)
	if bad > 0 {
		return 1
	}
	return 0
}

func algoOf(comm *goccl.Comm, c mcase) string {
	name, why := comm.Algo(c.kind, c.count*c.dt.Size())
	return name + ": " + why
}
