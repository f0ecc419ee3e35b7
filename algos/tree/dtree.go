package tree

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/internal/shape"
	"github.com/goccl/goccl/algos/reduce"
)

// step is one message of the double-tree AllReduce on one link direction.
type step struct {
	slot  int  // position in the link's schedule (see schedule)
	tree  int  // 0 or 1
	up    bool // towards the tree's root
	chunk int
	child int // index of the child in the tree (receiving up, sending down)
}

// schedule orders a link direction's messages by (slot, tree), where chunk i's upward
// message has slot 2i and its downward message slot 2(i+lag)+1. Both ends of a link
// compute the same order. It is deadlock-free: every message waits only for messages
// of smaller slot, or of the same slot and tree nearer the leaves (up) or the root
// (down), so the smallest unfinished message can always go. The lag lets chunk i's
// downward message come after chunk i+lag's upward one, about the time the reduction
// takes to climb and descend the tree, so upward chunks keep flowing on links that also
// carry the other tree's downward traffic.
func schedule(steps []step) {
	slices.SortFunc(steps, func(x, y step) int {
		return cmp.Or(cmp.Compare(x.slot, y.slot), cmp.Compare(x.tree, y.tree))
	})
}

// allReduce runs the double binary tree: half t of the buffer goes up and down tree t.
// An interior rank accumulates its children's chunks into Recv (after its own Send),
// forwards the sum up, and later overwrites Recv with the final chunk coming down; the
// root finishes (Avg) each chunk and turns it around.
func allReduce(ctx context.Context, p algos.Peers, a *algos.Args, cs int) error {
	rank, w := p.Rank(), p.Size()
	esz := a.DType.Size()
	half := [2][2]int{{0, (a.Count + 1) / 2 * esz}, {(a.Count + 1) / 2 * esz, a.Count * esz}}
	var nchunks [2]int
	for t := range 2 {
		nchunks[t] = algos.NumChunks(half[t][1]-half[t][0], cs)
	}
	if nchunks[0] == 1 && nchunks[1] == 1 && half[0][1]-half[0][0] <= algos.EagerLimit(p) {
		pl := serialPlanFor(w, rank)
		return runSerial(ctx, p, a, pl.nodes, pl.ops, half)
	}
	return allReducePipelined(ctx, p, a, cs, half, nchunks)
}

// allReducePipelined runs the chunks of each link direction on a goroutine of their own
// (apart from allReduce so that the serial path's context does not escape with theirs).
func allReducePipelined(ctx context.Context, p algos.Peers, a *algos.Args, cs int, half [2][2]int, nchunks [2]int) error {
	rank, w := p.Rank(), p.Size()
	nodes := serialPlanFor(w, rank).nodes // the trees, built once per world size and rank
	l := getLists(nodes, nchunks, w)
	defer l.put() // after g.Wait: no goroutine holds a list then
	sends, recvs := l.sends, l.recvs
	// Per tree: childDone[t][ci] counts chunks with child ci reduced in; sentUp[t] chunks
	// sent to the parent; down[t] chunks whose final value is in Recv.
	var childDone [2][]algos.Progress
	var sentUp, down [2]algos.Progress
	for t := range 2 {
		childDone[t] = make([]algos.Progress, len(nodes[t].Children))
	}
	rng := func(s step) (int, int) {
		lo, hi := algos.Chunk(half[s.tree][1]-half[s.tree][0], cs, s.chunk)
		return half[s.tree][0] + lo, half[s.tree][0] + hi
	}

	g, ctx := errgroup.WithContext(ctx)
	for peer, list := range recvs {
		if len(list) == 0 {
			continue // a link of an earlier call that got the same pooled lists
		}
		schedule(list)
		g.Go(func() error {
			for k, s := range list {
				lo, hi := rng(s)
				nd := nodes[s.tree]
				if !s.up {
					// Recv held what we sent up; overwrite it only once that send is done.
					if err := sentUp[s.tree].Wait(ctx, s.chunk+1); err != nil {
						return err
					}
					if err := algos.Recv(ctx, p, peer, tag(phaseAllReduce, k), a.Recv[lo:hi]); err != nil {
						return fmt.Errorf("tree %d down, chunk %d: %w", s.tree, s.chunk, err)
					}
					down[s.tree].Advance()
					continue
				}
				src := a.Send[lo:hi]
				if s.child > 0 {
					if err := childDone[s.tree][s.child-1].Wait(ctx, s.chunk+1); err != nil {
						return err
					}
					src = a.Recv[lo:hi]
				}
				if err := algos.RecvReduce(ctx, p, peer, tag(phaseAllReduce, k), a.DType, a.Op, a.Recv[lo:hi], src); err != nil {
					return fmt.Errorf("tree %d up, chunk %d: %w", s.tree, s.chunk, err)
				}
				last := s.child == len(nd.Children)-1
				if last && nd.Parent < 0 {
					if err := reduce.Finish(a.DType, a.Op, a.Recv[lo:hi], w); err != nil {
						return err
					}
				}
				childDone[s.tree][s.child].Advance()
				if last && nd.Parent < 0 {
					down[s.tree].Advance()
				}
			}
			return nil
		})
	}
	for peer, list := range sends {
		if len(list) == 0 {
			continue
		}
		schedule(list)
		g.Go(func() error {
			for k, s := range list {
				lo, hi := rng(s)
				nd := nodes[s.tree]
				src := a.Recv[lo:hi]
				switch {
				case !s.up:
					if err := down[s.tree].Wait(ctx, s.chunk+1); err != nil {
						return err
					}
				case len(nd.Children) > 0:
					if err := childDone[s.tree][len(nd.Children)-1].Wait(ctx, s.chunk+1); err != nil {
						return err
					}
				default:
					src = a.Send[lo:hi] // a leaf sends its input as is
				}
				if err := algos.Send(ctx, p, peer, tag(phaseAllReduce, k), src); err != nil {
					dir := "down"
					if s.up {
						dir = "up"
					}
					return fmt.Errorf("tree %d %s, chunk %d: %w", s.tree, dir, s.chunk, err)
				}
				if s.up {
					sentUp[s.tree].Advance()
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// buildSteps lays out the messages of both trees on each of this rank's links, up and
// down, nchunks[t] chunks on tree t, in no particular order (schedule orders them).
func buildSteps(sends, recvs map[int][]step, nodes [2]shape.Node, nchunks [2]int, w int) {
	lag := 2*bits.Len(uint(w)) + 1
	for t := range 2 {
		nd := nodes[t]
		for i := range nchunks[t] {
			up, down := 2*i, 2*(i+lag)+1
			if nd.Parent >= 0 {
				sends[nd.Parent] = append(sends[nd.Parent], step{slot: up, tree: t, up: true, chunk: i})
				recvs[nd.Parent] = append(recvs[nd.Parent], step{slot: down, tree: t, chunk: i})
			}
			for ci, c := range nd.Children {
				recvs[c] = append(recvs[c], step{slot: up, tree: t, up: true, chunk: i, child: ci})
				sends[c] = append(sends[c], step{slot: down, tree: t, chunk: i, child: ci})
			}
		}
	}
}

// lists are a pipelined AllReduce's step lists, per link and direction. They come from a
// pool and go back after the call: built per call, they were 2.5-10 KiB per call and
// rank at 2 and 4 ranks and 4-12 MiB, growing with the chunks, which a process with a
// large heap pays for in page faults (BENCHMARKS.md, "Speed", 28e and 29d).
type lists struct{ sends, recvs map[int][]step }

var listsPool = sync.Pool{New: func() any { return &lists{sends: map[int][]step{}, recvs: map[int][]step{}} }}

// getLists returns pooled lists holding buildSteps' steps for this call. A link that an
// earlier call had and this one does not keeps an empty list.
func getLists(nodes [2]shape.Node, nchunks [2]int, w int) *lists {
	l := listsPool.Get().(*lists)
	for _, m := range [2]map[int][]step{l.sends, l.recvs} {
		for k, v := range m {
			m[k] = v[:0]
		}
	}
	buildSteps(l.sends, l.recvs, nodes, nchunks, w)
	return l
}

func (l *lists) put() { listsPool.Put(l) }

// op is one message of the serial AllReduce: a step of a link's schedule, its index on
// the link (which its tag carries) and its direction on this rank.
type op struct {
	step
	peer, k int
	recv    bool
}

// serialPlan is the serial AllReduce's order of messages for one rank of a world, the
// same on every call. Built per call (the trees, the links' step lists in maps, the
// sorted order), it was 1.3 KiB in 18 allocations per call and rank at 4 ranks, which a
// process with a large heap pays for in page faults (BENCHMARKS.md, "Speed", 28e); it
// is built once per world size and rank and kept.
type serialPlan struct {
	nodes [2]shape.Node
	ops   []op
}

type planKey struct{ w, rank int }

var (
	plansMu sync.RWMutex
	plans   = map[planKey]*serialPlan{}
)

// serialPlanFor returns the plan of rank in a world of w, building it the first time.
func serialPlanFor(w, rank int) *serialPlan {
	k := planKey{w, rank}
	plansMu.RLock()
	pl := plans[k]
	plansMu.RUnlock()
	if pl != nil {
		return pl
	}
	nodes := shape.DoubleTree(w, rank)
	sends, recvs := map[int][]step{}, map[int][]step{}
	buildSteps(sends, recvs, nodes, [2]int{1, 1}, w)
	pl = &serialPlan{nodes: nodes, ops: serialOps(sends, recvs)}
	plansMu.Lock()
	defer plansMu.Unlock()
	if old := plans[k]; old != nil {
		return old
	}
	plans[k] = pl
	return pl
}

// serialOps orders the messages of a single-chunk double-tree AllReduce, which runs in
// the calling goroutine (runSerial): small ones are latency, where goroutines and their
// hand-offs cost more than the messages (see BENCHMARKS.md, "Speed"). Each link keeps
// its schedule and tags; this rank's messages run in (slot, tree) order, receives
// before sends of the same slot and tree, which respects every dependency of the
// concurrent version (a chunk goes up after the children's parts came in; down after it
// came down or, at the root, was reduced). It cannot deadlock: the smallest undelivered message in that order has
// everything before it on both ends delivered, so its sender sends it (sends of at most
// algos.EagerBytes never wait for the receiver) and its receiver then gets it.
func serialOps(sends, recvs map[int][]step) []op {
	var ops []op
	for peer, list := range recvs {
		schedule(list)
		for k, s := range list {
			ops = append(ops, op{step: s, peer: peer, k: k, recv: true})
		}
	}
	for peer, list := range sends {
		schedule(list)
		for k, s := range list {
			ops = append(ops, op{step: s, peer: peer, k: k})
		}
	}
	slices.SortFunc(ops, func(x, y op) int {
		rx, ry := 0, 0
		if !x.recv {
			rx = 1
		}
		if !y.recv {
			ry = 1
		}
		// Children's parts come in child order: the sum's order is fixed, as in allReduce.
		return cmp.Or(cmp.Compare(x.slot, y.slot), cmp.Compare(x.tree, y.tree), cmp.Compare(rx, ry), cmp.Compare(x.child, y.child))
	})
	return ops
}

// runSerial runs ops (serialOps' order, one chunk per tree: tree t's half of the buffer
// is the byte range half[t]).
func runSerial(ctx context.Context, p algos.Peers, a *algos.Args, nodes [2]shape.Node, ops []op, half [2][2]int) error {
	w := p.Size()
	for _, o := range ops {
		lo, hi := half[o.tree][0], half[o.tree][1]
		nd := nodes[o.tree]
		t := tag(phaseAllReduce, o.k)
		switch {
		case o.recv && !o.up:
			if err := algos.Recv(ctx, p, o.peer, t, a.Recv[lo:hi]); err != nil {
				return fmt.Errorf("tree %d down, chunk 0: %w", o.tree, err)
			}
		case o.recv:
			src := a.Send[lo:hi]
			if o.child > 0 {
				src = a.Recv[lo:hi]
			}
			if err := algos.RecvReduce(ctx, p, o.peer, t, a.DType, a.Op, a.Recv[lo:hi], src); err != nil {
				return fmt.Errorf("tree %d up, chunk 0: %w", o.tree, err)
			}
			if o.child == len(nd.Children)-1 && nd.Parent < 0 {
				if err := reduce.Finish(a.DType, a.Op, a.Recv[lo:hi], w); err != nil {
					return err
				}
			}
		default:
			src := a.Recv[lo:hi]
			if o.up && len(nd.Children) == 0 {
				src = a.Send[lo:hi] // a leaf sends its input as is
			}
			if err := algos.Send(ctx, p, o.peer, t, src); err != nil {
				dir := "down"
				if o.up {
					dir = "up"
				}
				return fmt.Errorf("tree %d %s, chunk 0: %w", o.tree, dir, err)
			}
		}
	}
	return nil
}
