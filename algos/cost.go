package algos

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/goccl/goccl/algos/internal/shape"
	"github.com/goccl/goccl/transport"
)

// CostModel is the alpha-beta(-gamma) model the auto selector uses to compare
// algorithms: a step costs Alpha, a byte on the busiest rank's link costs 1/Beta, and a
// reduced byte costs 1/Gamma. NCCL's tuner has the same shape (latency x steps +
// bytes / bandwidth, reference/anchors.md 2.6). The numbers belong to a transport;
// calibrate them from measured latency and bandwidth.
type CostModel struct {
	Alpha      time.Duration // one step's latency (a message's wake-up and flight)
	Beta       float64       // bytes per second one rank moves over one link direction
	Gamma      float64       // bytes per second the reduce kernel combines (0 = free)
	ChunkBytes int           // the pipelining unit algorithms use (0 = DefaultChunkBytes)

	// Inter prices the links between hosts when the ranks span several; nil means every
	// link is like this one (one host, or a flat network). Its Beta is what one host's
	// network link moves per direction, shared by all of that host's ranks (a NIC); the
	// fields above then price the links inside a host (shared memory, NVLink). Reduction
	// happens on the ranks, so a zero Inter.Gamma takes this model's Gamma.
	Inter *CostModel
	// PerHost is how many consecutive ranks share a host (launchers place ranks that
	// way); 0, or a value >= the world size, means one host. It only matters with Inter.
	PerHost int
}

// HostModel returns the model of a communicator laid out as l, whose links inside a
// host cost intra and links between hosts cost inter: intra itself on one host, and
// otherwise intra with Inter and PerHost set (PerHost 1 when every rank has a host of
// its own, which prices every link as inter).
func HostModel(intra, inter CostModel, l Layout) CostModel {
	if l.Hosts <= 1 {
		return intra
	}
	e := inter
	e.Inter, e.PerHost = nil, 0
	intra.Inter, intra.PerHost = &e, max(l.PerHost, 1)
	return intra
}

// Default models: TCP on loopback or a LAN (15 us steps, 2 GB/s) and shared memory
// (1 us, 8 GB/s), with the plain Go reduce kernel (6 GB/s).
var (
	TCPModel = CostModel{Alpha: 15 * time.Microsecond, Beta: 2e9, Gamma: 6e9}
	ShmModel = CostModel{Alpha: time.Microsecond, Beta: 8e9, Gamma: 6e9}
)

// Predict returns the model's time for alg running kind on bytes (counted as Bytes
// counts them) over world ranks. An algorithm that does not implement kind is predicted
// as the algorithm its fallback chain lands on, which is what would run. It is pure
// arithmetic and works for any world size (the tree shapes are computed, O(world), once
// per world size and layout). With Inter and PerHost (see HostModel) every algorithm is
// priced with the links its messages really cross: a ring step waits for the slower
// link, a tree's paths and a host's network link are counted from the tree shapes, and
// "hier" adds its host-local and cross-host phases.
func (m CostModel) Predict(alg string, kind transport.Kind, bytes, world int) (time.Duration, error) {
	if world < 1 || bytes < 0 {
		return 0, fmt.Errorf("algos: %w: predict for %d bytes over %d ranks", transport.ErrInvalid, bytes, world)
	}
	f, ok := formulas[alg]
	if !ok {
		return 0, fmt.Errorf("algos: %w: no cost formula for algorithm %q (have %s)", transport.ErrInvalid, alg, formulaNames())
	}
	for !natively(alg, kind) {
		alg = fallbackOf(alg)
		if alg == "" {
			return 0, fmt.Errorf("algos: %w: no algorithm implements %s", transport.ErrNotSupported, kind)
		}
		f = formulas[alg]
	}
	if world == 1 {
		return 0, nil
	}
	m = m.withDefaults()
	return seconds(f(m, kind, float64(bytes), world)), nil
}

func (m CostModel) withDefaults() CostModel {
	if m.Alpha <= 0 && m.Beta <= 0 {
		m.Alpha, m.Beta = TCPModel.Alpha, TCPModel.Beta
	}
	if m.Beta <= 0 {
		m.Beta = TCPModel.Beta
	}
	if m.ChunkBytes <= 0 {
		m.ChunkBytes = DefaultChunkBytes
	}
	return m
}

func (m CostModel) a() float64 { return m.Alpha.Seconds() }

// wire is the time to move n bytes over one link direction.
func (m CostModel) wire(n float64) float64 { return n / m.Beta }

// red is the time to reduce n bytes.
func (m CostModel) red(n float64) float64 {
	if m.Gamma <= 0 {
		return 0
	}
	return n / m.Gamma
}

// chunk is the pipelining unit for a piece of n bytes.
func (m CostModel) chunk(n float64) float64 { return math.Min(n, float64(m.ChunkBytes)) }

func seconds(s float64) time.Duration { return time.Duration(s * 1e9) }

type formula func(m CostModel, kind transport.Kind, n float64, w int) float64

// natively lists what each built-in algorithm implements itself; the rest falls back.
var nativeKinds = map[string][]transport.Kind{
	"ring": {transport.KindAllReduce, transport.KindReduceScatter, transport.KindAllGather,
		transport.KindBroadcast, transport.KindReduce},
	"tree": {transport.KindAllReduce, transport.KindReduce, transport.KindBroadcast, transport.KindBarrier},
	"naive": {transport.KindAllReduce, transport.KindReduce, transport.KindBroadcast, transport.KindAllGather,
		transport.KindReduceScatter, transport.KindGather, transport.KindScatter, transport.KindAllToAll,
		transport.KindBarrier, transport.KindSendRecv},
	"hier": {transport.KindAllReduce, transport.KindReduce, transport.KindBroadcast},
}

func natively(alg string, kind transport.Kind) bool {
	for _, k := range nativeKinds[alg] {
		if k == kind {
			return true
		}
	}
	return false
}

var formulas = map[string]formula{"ring": ringCost, "tree": treeCost, "naive": naiveCost, "hier": hierCost}

// formulaNames lists the algorithms Predict knows, for its error message.
func formulaNames() string {
	names := make([]string, 0, len(formulas))
	for n := range formulas {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// ringCost: reduce-scatter and all-gather move (W-1)/W of the data in W-1 steps each;
// Broadcast and Reduce are a pipelined chain, W-1 hops plus the pipeline's fill.
func ringCost(m CostModel, kind transport.Kind, n float64, w int) float64 {
	if l, h := m.split(w); h > 1 {
		return ringHosts(m, kind, n, w, l, h)
	}
	wf := float64(w)
	switch kind {
	case transport.KindAllReduce:
		seg := n / wf
		return 2*(wf-1)*m.a() + m.wire(2*(wf-1)*seg) + m.red((wf-1)*seg)
	case transport.KindReduceScatter:
		blk := n / wf
		return (wf-1)*m.a() + m.wire((wf-1)*blk) + m.red((wf-1)*blk)
	case transport.KindAllGather:
		return (wf-1)*m.a() + m.wire((wf-1)*n/wf)
	case transport.KindBroadcast:
		return (wf-1)*m.a() + m.wire(n+(wf-2)*m.chunk(n))
	case transport.KindReduce:
		fill := n + (wf-2)*m.chunk(n)
		return (wf-1)*m.a() + m.wire(fill) + m.red(fill)
	}
	return math.Inf(1)
}

// treeCost: the double binary tree sends half the data up and down each tree, 2 x depth
// steps; the busiest rank's bytes come from the actual tree shapes. Reduce and Broadcast
// use a binomial tree whose root serves ceil(log2 W) children.
func treeCost(m CostModel, kind transport.Kind, n float64, w int) float64 {
	if l, h := m.split(w); h > 1 {
		return treeHosts(m, kind, n, w, l)
	}
	lg := float64(bits.Len(uint(w - 1)))
	switch kind {
	case transport.KindAllReduce:
		ts := doubleTreeStats(w)
		half := n / 2
		return 2*float64(ts.depth)*m.a() + m.wire(float64(ts.maxSends)*half+2*float64(ts.depth)*m.chunk(half)) +
			m.red(float64(ts.maxChildren)*half)
	case transport.KindReduce:
		return lg*m.a() + m.wire(lg*n) + m.red(lg*n)
	case transport.KindBroadcast:
		return lg*m.a() + m.wire(lg*n)
	case transport.KindBarrier:
		return 2 * lg * m.a()
	}
	return math.Inf(1)
}

// naiveCost: the root (rank 0, or the call's root) handles every other rank's message
// one after another, so its steps grow with W; data in and out of the root overlap on
// full-duplex links.
func naiveCost(m CostModel, kind transport.Kind, n float64, w int) float64 {
	if l, h := m.split(w); h > 1 {
		return naiveHosts(m, kind, n, w, l)
	}
	return naiveSteps(m, kind, n, w, float64(w-1))
}

// naiveSteps is the naive cost when the root's exchanges with steps of its peers go
// over links priced by m (so a root with peers behind two kinds of link pays the sum).
func naiveSteps(m CostModel, kind transport.Kind, n float64, w int, steps float64) float64 {
	wf := float64(w)
	switch kind {
	case transport.KindAllReduce:
		return 2*steps*m.a() + m.wire(steps*n) + m.red(steps*n)
	case transport.KindReduce:
		return steps*m.a() + m.wire(steps*n) + m.red(steps*n)
	case transport.KindBroadcast:
		return steps*m.a() + m.wire(steps*n)
	case transport.KindAllGather: // gather W blocks, then send the whole buffer to everyone
		return 2*steps*m.a() + m.wire(steps*n/wf+steps*n)
	case transport.KindReduceScatter: // every rank's whole input to the root, a block back
		return 2*steps*m.a() + m.wire(steps*n+steps*n/wf) + m.red(steps*n)
	case transport.KindGather, transport.KindScatter, transport.KindAllToAll:
		return steps*m.a() + m.wire(steps*n/wf)
	case transport.KindBarrier:
		return 2 * steps * m.a()
	case transport.KindSendRecv:
		return m.a() + m.wire(n)
	}
	return math.Inf(1)
}

type treeStats struct{ depth, maxSends, maxChildren int }

var treeStatsCache sync.Map // world -> treeStats

// doubleTreeStats walks both trees once per world size: the deepest rank, and the most
// half-buffers any rank sends (one up plus one per child, summed over the two trees).
func doubleTreeStats(w int) treeStats {
	if v, ok := treeStatsCache.Load(w); ok {
		return v.(treeStats)
	}
	var s treeStats
	nodes := make([][2]shape.Node, w)
	for r := range w {
		nodes[r] = shape.DoubleTree(w, r)
	}
	for r := range w {
		sends, kids := 0, 0
		for t := range 2 {
			nd := nodes[r][t]
			if nd.Parent >= 0 {
				sends++
			}
			sends += len(nd.Children)
			kids += len(nd.Children)
			s.depth = max(s.depth, shape.Depth(w, r, func(x int) shape.Node { return nodes[x][t] }))
		}
		s.maxSends = max(s.maxSends, sends)
		s.maxChildren = max(s.maxChildren, kids)
	}
	treeStatsCache.Store(w, s)
	return s
}

// The rest of this file prices communicators that span hosts: ranks sit PerHost to a
// host, consecutively, and links between hosts cost Inter.

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
	return e.withDefaults()
}

// worst has the larger latency and the smaller bandwidth of a and b, and a's reduce
// speed and chunk: a step that crosses both kinds of link waits for the slower one.
func worst(a, b CostModel) CostModel {
	return CostModel{Alpha: max(a.Alpha, b.Alpha), Beta: math.Min(a.Beta, b.Beta), Gamma: a.Gamma, ChunkBytes: a.ChunkBytes}
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
		t := float64(w-h)*(i.a()+i.wire(c)) + float64(h-1)*(e.a()+e.wire(c)) + (n-c)/math.Min(i.Beta, e.Beta)
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
	switch kind {
	case transport.KindAllReduce:
		ld := hostLoadOf(shapeDouble, w, l)
		half := n / 2
		fill := 2 * float64(ld.depth) * i.chunk(half) / math.Min(i.Beta, e.Beta)
		return 2*ld.path(i, e) + math.Max(i.wire(ld.rank*half), e.wire(ld.nic*half)) + fill + i.red(ld.red*half)
	case transport.KindReduce:
		ld := hostLoadOf(shapeUp, w, l)
		return ld.path(i, e) + math.Max(i.wire(ld.rank*n), e.wire(ld.nic*n)) + i.red(ld.red*n)
	case transport.KindBroadcast:
		ld := hostLoadOf(shapeDown, w, l)
		return ld.path(i, e) + math.Max(i.wire(ld.rank*n), e.wire(ld.nic*n))
	case transport.KindBarrier:
		return 2 * hostLoadOf(shapeUp, w, l).path(i, e)
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
	return phaseAlgo(m.flat().withDefaults(), kind, float64(bytes), world)
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
