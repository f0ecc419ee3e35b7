package algostest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// Case is one collective call on every rank of a mesh, with how its inputs are drawn.
type Case struct {
	Kind       transport.Kind
	DType      transport.DType
	Op         transport.Op
	Count      int
	Root       int  // root for rooted kinds; the shift for SendRecv (rank r sends to r+Root)
	InPlace    bool // NCCL's in-place form for the kind
	ChunkBytes int
	Values     Values
	Seed       uint64
}

func (c Case) String() string {
	s := fmt.Sprintf("%s %s", c.Kind, c.DType)
	if reducing(c.Kind) {
		s += " " + c.Op.String()
	}
	s += fmt.Sprintf(" count=%d", c.Count)
	if rooted(c.Kind) || c.Kind == transport.KindSendRecv {
		s += fmt.Sprintf(" root=%d", c.Root)
	}
	if c.InPlace {
		s += " in-place"
	}
	if c.ChunkBytes != 0 {
		s += fmt.Sprintf(" chunk=%d", c.ChunkBytes)
	}
	if c.Values == Real {
		s += " real"
	}
	return s
}

func reducing(k transport.Kind) bool {
	return k == transport.KindAllReduce || k == transport.KindReduce || k == transport.KindReduceScatter
}

func rooted(k transport.Kind) bool {
	return k == transport.KindReduce || k == transport.KindBroadcast || k == transport.KindGather ||
		k == transport.KindScatter
}

// garbage fills output buffers before a call, so a result the algorithm forgot to
// write cannot pass by accident.
const garbage = 0xa5

// setup is one rank's buffers: the Args passed to the algorithm plus copies to check.
type setup struct {
	args  *algos.Args
	input []byte // this rank's input (what Send held before the call)
	out   []byte // where the result lands (Recv, or the aliased buffer in-place)
}

// Check runs c on every rank of m with run and compares the results with the serial
// reference; it returns nil or an error naming the first wrong rank and element.
func (c Case) Check(ctx context.Context, m *Mesh, run func(context.Context, algos.Peers, *algos.Args) error) error {
	w := m.World
	rng := rand.New(rand.NewPCG(c.Seed, uint64(c.Count)<<8|uint64(w)))
	n := c.Count * c.DType.Size()
	sets := make([]setup, w)
	args := make([]*algos.Args, w)
	for r := range w {
		sets[r] = c.build(rng, r, w, n, nil)
		args[r] = sets[r].args
	}
	var entered atomic.Int32
	if c.Kind == transport.KindBarrier {
		inner := run
		run = func(ctx context.Context, p algos.Peers, a *algos.Args) error {
			if p.Rank() == w-1 {
				time.Sleep(2 * time.Millisecond) // a late rank: the others must wait for it
			}
			entered.Add(1)
			if err := inner(ctx, p, a); err != nil {
				return err
			}
			if got := entered.Load(); got != int32(w) {
				return fmt.Errorf("rank %d left the barrier when only %d of %d ranks had entered", p.Rank(), got, w)
			}
			return nil
		}
	}
	if err := FirstError(m.Run(ctx, args, run)); err != nil {
		return err
	}
	return c.verify(sets, w, n)
}

// IssueFunc starts rank p's part of the call a and returns what waits for it to end:
// a blocking call returns a wait that only reports its error, an asynchronous one the
// wait of its handle.
type IssueFunc func(ctx context.Context, p algos.Peers, a *algos.Args) (wait func() error, err error)

// CheckBatch runs cases on every rank of m as one batch: each rank issues them all, in
// order, with issue, and then waits for each in turn, so an asynchronous issue has them
// all in flight together. Each case gets its own buffers, drawn as Check draws them,
// and every result is compared with the serial reference; the error names the case,
// the rank and the element. alloc, if not nil, gives rank's send and receive buffers
// of n bytes (a communicator's shared memory, say); nil allocates them with make.
func CheckBatch(ctx context.Context, m *Mesh, cases []Case, issue IssueFunc, alloc func(rank, n int) []byte) error {
	if len(cases) == 0 {
		return nil
	}
	w := m.World
	sets := make([][]setup, len(cases))
	for i, c := range cases {
		rng := rand.New(rand.NewPCG(c.Seed, uint64(c.Count)<<8|uint64(w)))
		sets[i] = make([]setup, w)
		for r := range w {
			sets[i][r] = c.build(rng, r, w, c.Count*c.DType.Size(), alloc)
		}
	}
	args := make([]*algos.Args, w)
	for r := range w {
		args[r] = sets[0][r].args
	}
	errs := m.Run(ctx, args, func(ctx context.Context, p algos.Peers, _ *algos.Args) error {
		r := p.Rank()
		waits := make([]func() error, 0, len(cases))
		for i, c := range cases {
			wait, err := issue(ctx, p, sets[i][r].args)
			if err != nil {
				return fmt.Errorf("%v (call %d of %d): %w", c, i, len(cases), err)
			}
			waits = append(waits, wait)
		}
		var first error
		for i, wait := range waits {
			if err := wait(); err != nil && first == nil {
				first = fmt.Errorf("%v (call %d of %d): %w", cases[i], i, len(cases), err)
			}
		}
		return first
	})
	if err := FirstError(errs); err != nil {
		return err
	}
	for i, c := range cases {
		if err := c.verify(sets[i], w, c.Count*c.DType.Size()); err != nil {
			return fmt.Errorf("call %d of %d: %w", i, len(cases), err)
		}
	}
	return nil
}

// build allocates rank r's buffers for c, in-place or not: the call's from alloc (nil:
// make), the copy of the input to check against always from make.
func (c Case) build(rng *rand.Rand, r, w, n int, alloc func(rank, n int) []byte) setup {
	if alloc == nil {
		alloc = func(_, n int) []byte { return make([]byte, n) }
	}
	in := func(size int) []byte {
		b := make([]byte, size)
		fill(rng, c.DType, c.Op, c.Values, b)
		return b
	}
	out := func(size int) []byte {
		b := alloc(r, size)
		for i := range b {
			b[i] = garbage
		}
		return b
	}
	clone := func(b []byte) []byte {
		d := alloc(r, len(b))
		copy(d, b)
		return d
	}
	a := &algos.Args{Kind: c.Kind, Count: c.Count, DType: c.DType, Op: c.Op, Root: c.Root, ChunkBytes: c.ChunkBytes,
		SendPeer: -1, RecvPeer: -1}
	var s setup
	isRoot := r == c.Root
	switch c.Kind {
	case transport.KindAllReduce, transport.KindAllToAll:
		size := n
		if c.Kind == transport.KindAllToAll {
			size = w * n
		}
		s.input = in(size)
		a.Send, a.Recv = clone(s.input), out(size)
		if c.InPlace {
			a.Recv = a.Send
		}
	case transport.KindReduce:
		s.input = in(n)
		a.Send = clone(s.input)
		if isRoot {
			a.Recv = out(n)
			if c.InPlace {
				a.Recv = a.Send
			}
		}
	case transport.KindBroadcast:
		s.input = in(n)
		a.Recv = out(n)
		if isRoot {
			a.Send = clone(s.input)
			if c.InPlace {
				a.Recv = a.Send
			}
		}
	case transport.KindAllGather, transport.KindGather:
		s.input = in(n)
		a.Send = clone(s.input)
		if c.Kind == transport.KindAllGather || isRoot {
			a.Recv = out(w * n)
			if c.InPlace {
				copy(a.Recv[r*n:], s.input)
				a.Send = a.Recv[r*n : (r+1)*n]
			}
		}
	case transport.KindReduceScatter, transport.KindScatter:
		s.input = in(w * n)
		a.Recv = out(n)
		if c.Kind == transport.KindReduceScatter || isRoot {
			a.Send = clone(s.input)
			if c.InPlace {
				a.Recv = a.Send[r*n : (r+1)*n]
			}
		}
	case transport.KindSendRecv:
		s.input = in(n)
		a.Send, a.Recv = clone(s.input), out(n)
		a.SendPeer, a.RecvPeer = (r+c.Root)%w, (r-c.Root%w+w)%w
	}
	s.args = a
	s.out = a.Recv
	return s
}

// verify compares every rank's output with the reference, and out-of-place inputs with
// their original contents (an algorithm must not write to Send).
func (c Case) verify(sets []setup, w, n int) error {
	cnt := c.Count
	inputs := make([][]byte, w)
	for r := range w {
		inputs[r] = sets[r].input
	}
	// reduced(block) is the reference reduction of element range [block*cnt, +cnt),
	// with sum|x| per element for the error bound; memoised, AllReduce asks W times.
	type red struct {
		e   []elem
		abs []float64
	}
	memo := map[int]red{}
	reduced := func(block int) ([]elem, []float64) {
		if m, ok := memo[block]; ok {
			return m.e, m.abs
		}
		out := make([]elem, cnt)
		abs := make([]float64, cnt)
		xs := make([]elem, w)
		for i := range cnt {
			for r := range w {
				xs[r] = decode(c.DType, inputs[r], block*cnt+i)
				abs[i] += math.Abs(xs[r].f)
			}
			out[i] = combine(c.DType, c.Op, xs, w)
		}
		memo[block] = red{out, abs}
		return out, abs
	}
	copied := func(src []byte, from int) []elem {
		out := make([]elem, cnt)
		for i := range cnt {
			out[i] = decode(c.DType, src, from*cnt+i)
		}
		return out
	}
	for r := range w {
		s := sets[r]
		var want [][]elem // per block of cnt elements of the output
		var abs [][]float64
		switch c.Kind {
		case transport.KindAllReduce:
			e, a := reduced(0)
			want, abs = [][]elem{e}, [][]float64{a}
		case transport.KindReduce:
			if r == c.Root {
				e, a := reduced(0)
				want, abs = [][]elem{e}, [][]float64{a}
			}
		case transport.KindReduceScatter:
			e, a := reduced(r)
			want, abs = [][]elem{e}, [][]float64{a}
		case transport.KindBroadcast:
			want = [][]elem{copied(inputs[c.Root], 0)}
		case transport.KindAllGather, transport.KindGather:
			if c.Kind == transport.KindAllGather || r == c.Root {
				for j := range w {
					want = append(want, copied(inputs[j], 0))
				}
			}
		case transport.KindScatter:
			want = [][]elem{copied(inputs[c.Root], r)}
		case transport.KindAllToAll:
			for j := range w {
				want = append(want, copied(inputs[j], r))
			}
		case transport.KindSendRecv:
			want = [][]elem{copied(inputs[(r-c.Root%w+w)%w], 0)}
		}
		if len(want) > 0 && len(s.out) != len(want)*n {
			return fmt.Errorf("%v: rank %d: output is %d bytes, want %d", c, r, len(s.out), len(want)*n)
		}
		for b, blk := range want {
			for i, e := range blk {
				got := decode(c.DType, s.out, b*cnt+i)
				var sa float64
				if abs != nil {
					sa = abs[b][i]
				}
				if err := c.compare(e, got, sa, w); err != nil {
					return fmt.Errorf("%v: world %d: rank %d element %d of block %d: %w", c, w, r, i, b, err)
				}
			}
		}
		if !c.InPlace && s.args.Send != nil && string(s.args.Send) != string(s.input) {
			return fmt.Errorf("%v: world %d: rank %d: the send buffer changed in an out-of-place call", c, w, r)
		}
	}
	return nil
}

func (c Case) compare(want, got elem, sumAbs float64, w int) error {
	if !c.DType.IsFloat() {
		if want.u != got.u {
			return fmt.Errorf("got %#x, want %#x", got.u, want.u)
		}
		return nil
	}
	// The reference is float64; store it in the dtype the way the result is stored.
	tol := tolerance(c.DType, c.Op, c.Values, want.f, sumAbs, w)
	if c.Kind == transport.KindBroadcast || c.Kind == transport.KindAllGather || c.Kind == transport.KindGather ||
		c.Kind == transport.KindScatter || c.Kind == transport.KindAllToAll || c.Kind == transport.KindSendRecv {
		tol = 0
	}
	if math.IsNaN(got.f) || math.Abs(got.f-want.f) > tol {
		return fmt.Errorf("got %v, want %v (tolerance %g)", got.f, want.f, tol)
	}
	return nil
}
