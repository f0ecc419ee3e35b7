package algos

import (
	"math"
	"math/bits"
	"sync"

	"github.com/goccl/goccl/algos/internal/shape"
	"github.com/goccl/goccl/transport"
)

// This file prices communicators that span hosts: ranks sit PerHost to a host,
// consecutively, and links between hosts cost Inter (cost.go has the one-host formulas).

// split returns the ranks per host and the number of hosts for a world of w under m:
// (w, 1) when m describes one host, (1, w) when every rank has a host of its own.
func (m CostModel) split(w int) (perHost, hosts int) {
	if m.Inter == nil || m.PerHost <= 0 || m.PerHost >= w {
		return w, 1
	}
	return m.PerHost, (w + m.PerHost - 1) / m.PerHost
}

// flat is m without its host structure: the model of the links inside a host.
func (m CostModel) flat() CostModel {
	m.Inter, m.PerHost = nil, 0
	return m
}

// inter is the model of the links between hosts, with m's reduce speed and chunk size
// where it gives none (a zero Inter means TCPModel's alpha and beta, as for m itself).
func (m CostModel) inter() CostModel {
	if m.Inter == nil {
		return m.flat()
	}
	e := *m.Inter
	e.Inter, e.PerHost = nil, 0
	if e.Gamma <= 0 {
		e.Gamma = m.Gamma
	}
	if e.ChunkBytes <= 0 {
		e.ChunkBytes = m.ChunkBytes
	}
	if e.EagerBytes <= 0 {
		e.EagerBytes = m.EagerBytes
	}
	return e.withDefaults()
}

// worst has the larger latency and the smaller bandwidth of a and b, and a's reduce
// speed and chunk: a step that crosses both kinds of link waits for the slower one.
// It has no Cores: its world spans hosts, so no single host's cores bound it.
func worst(a, b CostModel) CostModel {
	return CostModel{Alpha: max(a.Alpha, b.Alpha), Overhead: max(a.Overhead, b.Overhead), Async: max(a.Async, b.Async),
		Beta: math.Min(a.Beta, b.Beta), Gamma: a.Gamma, ChunkBytes: a.ChunkBytes, EagerBytes: min(a.EagerBytes, b.EagerBytes)}
}

// ringHosts: consecutive ranks per host means the ring leaves and enters each host
// once, one flow per direction on each host's network link. Reduce-scatter and
// all-gather steps move in lockstep (a step forwards what the previous one delivered),
// so each costs the slower link's latency and bandwidth. The chains of Broadcast and
// Reduce are pipelined: the first chunk pays every hop's latency and transfer (h-1 of
// the w-1 hops cross hosts), the rest of the message follows at the slowest hop's rate.
func ringHosts(m CostModel, kind transport.Kind, n float64, w, l, h int) float64 {
	i, e := m.flat(), m.inter()
	if l == 1 {
		return ringCost(e, kind, n, w)
	}
	switch kind {
	case transport.KindBroadcast, transport.KindReduce:
		c := i.chunk(n)
		t := float64(w-h)*(i.a()+i.wire(c)) + float64(h-1)*(e.a()+e.wire(c)) + (n-c)/math.Min(i.Beta, e.Beta) +
			chainMsgs(float64(w), i.chunks(n))*max(i.o(), e.o())
		if kind == transport.KindReduce {
			t += i.red(n + float64(w-2)*c)
		}
		return t
	}
	return ringCost(worst(i, e), kind, n, w)
}

// treeHosts prices the trees from their real shapes: the costliest root-to-leaf path
// (a cross-host edge costs Inter's alpha), the busiest rank's host-local bytes against
// the busiest host's network bytes (a host's ranks share its link), and the busiest
// reducer; the double tree's pipeline fill runs at the slower bandwidth.
func treeHosts(m CostModel, kind transport.Kind, n float64, w, l int) float64 {
	i, e := m.flat(), m.inter()
	if l == 1 {
		return treeCost(e, kind, n, w)
	}
	o := max(i.o(), e.o()) // the busiest rank's messages cross both kinds of link
	lg := float64(bits.Len(uint(w - 1)))
	switch kind {
	case transport.KindAllReduce:
		ld := hostLoadOf(shapeDouble, w, l)
		half := n / 2
		fill := 2 * float64(ld.depth) * i.chunk(half) / math.Min(i.Beta, e.Beta)
		msgs := 2 * float64(doubleTreeStats(w).maxSends) * i.chunks(half)
		return 2*ld.path(i, e) + msgs*o + math.Max(i.wire(ld.rank*half), e.wire(ld.nic*half)) + fill + i.red(ld.red*half)
	case transport.KindReduce:
		ld := hostLoadOf(shapeUp, w, l)
		return ld.path(i, e) + 2*lg*i.chunks(n)*o + math.Max(i.wire(ld.rank*n), e.wire(ld.nic*n)) + i.red(ld.red*n)
	case transport.KindBroadcast:
		ld := hostLoadOf(shapeDown, w, l)
		return ld.path(i, e) + 2*lg*i.chunks(n)*o + math.Max(i.wire(ld.rank*n), e.wire(ld.nic*n))
	case transport.KindBarrier:
		return 2*hostLoadOf(shapeUp, w, l).path(i, e) + 2*lg*o
	}
	return math.Inf(1)
}

// naiveHosts: the root (a host's first rank) serves l-1 peers over host-local links
// and w-l over its network link, one after another.
func naiveHosts(m CostModel, kind transport.Kind, n float64, w, l int) float64 {
	i, e := m.flat(), m.inter()
	switch {
	case l == 1:
		return naiveCost(e, kind, n, w)
	case kind == transport.KindSendRecv:
		return naiveCost(worst(i, e), kind, n, w)
	}
	return naiveSteps(i, kind, n, w, float64(l-1)) + naiveSteps(e, kind, n, w, float64(w-l))
}

// hierCost prices algos/hier: a reduce inside each host to its leader, an AllReduce
// among the leaders over the network, a broadcast inside each host (Reduce keeps the
// first two phases, Broadcast the last two). Each phase runs ring or tree, whichever
// PhaseAlgo finds faster, exactly as the algorithm chooses.
func hierCost(m CostModel, kind transport.Kind, n float64, w int) float64 {
	l, h := m.split(w)
	i, e := m.flat(), m.inter()
	phase := func(pm CostModel, k transport.Kind, size int) float64 {
		if size <= 1 {
			return 0
		}
		if phaseAlgo(pm, k, n, size) == "tree" {
			return treeCost(pm, k, n, size)
		}
		return ringCost(pm, k, n, size)
	}
	switch kind {
	case transport.KindAllReduce:
		return phase(i, transport.KindReduce, l) + phase(e, transport.KindAllReduce, h) + phase(i, transport.KindBroadcast, l)
	case transport.KindReduce:
		return phase(i, transport.KindReduce, l) + phase(e, transport.KindReduce, h)
	case transport.KindBroadcast:
		return phase(e, transport.KindBroadcast, h) + phase(i, transport.KindBroadcast, l)
	}
	return math.Inf(1)
}

// PhaseAlgo returns "ring" or "tree", whichever m predicts is faster for kind on bytes
// over world ranks on one host (ring on ties). Hierarchical algorithms choose each of
// their phases with it, so the cost model and the algorithm agree on what runs.
func PhaseAlgo(m CostModel, kind transport.Kind, bytes, world int) string {
	return phaseAlgo(m.flat().at(world).withDefaults(), kind, float64(bytes), world)
}

func phaseAlgo(m CostModel, kind transport.Kind, n float64, w int) string {
	if treeCost(m, kind, n, w) < ringCost(m, kind, n, w) {
		return "tree"
	}
	return "ring"
}

// Tree shapes hostLoadOf walks.
const (
	shapeDouble = iota // NCCL's double binary tree, each half up and down (AllReduce)
	shapeUp            // binomial tree rooted at 0, towards the root (Reduce, Barrier)
	shapeDown          // binomial tree rooted at 0, away from the root (Broadcast)
)

// hostLoad is what a tree shape asks of the links when ranks sit l to a host, counted
// in payloads (half the buffer for the double tree, all of it for the binomial tree).
type hostLoad struct {
	paths          []edgeCount // distinct root-to-rank paths, by kind of edge
	depth          int         // edges on the longest path
	rank, nic, red float64     // busiest rank's host-local payloads (in or out), busiest host link, busiest reducer
}

type edgeCount struct{ intra, inter int }

// path is the latency of the costliest root-to-rank path.
func (ld hostLoad) path(i, e CostModel) float64 {
	worst := 0.0
	for _, p := range ld.paths {
		worst = max(worst, float64(p.intra)*i.a()+float64(p.inter)*e.a())
	}
	return worst
}

var hostLoadCache sync.Map // [3]int{shape, w, l} -> hostLoad

// hostLoadOf walks shape over w ranks, l to a host, once per (shape, w, l): O(w log w).
func hostLoadOf(sh, w, l int) hostLoad {
	key := [3]int{sh, w, l}
	if v, ok := hostLoadCache.Load(key); ok {
		return v.(hostLoad)
	}
	var trees []func(int) shape.Node
	if sh == shapeDouble {
		nodes := make([][2]shape.Node, w)
		for r := range w {
			nodes[r] = shape.DoubleTree(w, r)
		}
		for t := range 2 {
			trees = append(trees, func(r int) shape.Node { return nodes[r][t] })
		}
	} else {
		nodes := make([]shape.Node, w)
		for r := range w {
			nodes[r] = shape.Binomial(w, 0, r)
		}
		trees = append(trees, func(r int) shape.Node { return nodes[r] })
	}
	up, down := sh != shapeDown, sh != shapeUp
	hosts := (w + l - 1) / l
	rankOut, rankIn, red := make([]float64, w), make([]float64, w), make([]float64, w)
	nicOut, nicIn := make([]float64, hosts), make([]float64, hosts)
	move := func(from, to int) {
		if from/l == to/l {
			rankOut[from]++
			rankIn[to]++
		} else {
			nicOut[from/l]++
			nicIn[to/l]++
		}
	}
	var ld hostLoad
	seen := map[edgeCount]bool{}
	for _, at := range trees {
		memo := make([]*edgeCount, w)
		var walk func(r int) edgeCount
		walk = func(r int) edgeCount {
			if memo[r] != nil {
				return *memo[r]
			}
			var ec edgeCount
			if p := at(r).Parent; p >= 0 {
				ec = walk(p)
				if p/l == r/l {
					ec.intra++
				} else {
					ec.inter++
				}
			}
			memo[r] = &ec
			return ec
		}
		for r := range w {
			if p := at(r).Parent; p >= 0 {
				if up {
					move(r, p)
					red[p]++
				}
				if down {
					move(p, r)
				}
			}
			ec := walk(r)
			ld.depth = max(ld.depth, ec.intra+ec.inter)
			if !seen[ec] {
				seen[ec] = true
				ld.paths = append(ld.paths, ec)
			}
		}
	}
	for r := range w {
		ld.rank, ld.red = max(ld.rank, rankOut[r], rankIn[r]), max(ld.red, red[r])
	}
	for h := range hosts {
		ld.nic = max(ld.nic, nicOut[h], nicIn[h])
	}
	hostLoadCache.Store(key, ld)
	return ld
}
