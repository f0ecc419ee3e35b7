package algos

import (
	"fmt"
	"math"
	"math/bits"
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
// arithmetic and works for any world size (the tree shapes are computed, O(world)).
func (m CostModel) Predict(alg string, kind transport.Kind, bytes, world int) (time.Duration, error) {
	if world < 1 || bytes < 0 {
		return 0, fmt.Errorf("algos: %w: predict for %d bytes over %d ranks", transport.ErrInvalid, bytes, world)
	}
	f, ok := formulas[alg]
	if !ok {
		return 0, fmt.Errorf("algos: %w: no cost formula for algorithm %q (have naive, ring, tree)", transport.ErrInvalid, alg)
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
		m = CostModel{Alpha: TCPModel.Alpha, Beta: TCPModel.Beta, Gamma: m.Gamma, ChunkBytes: m.ChunkBytes}
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
}

func natively(alg string, kind transport.Kind) bool {
	for _, k := range nativeKinds[alg] {
		if k == kind {
			return true
		}
	}
	return false
}

var formulas = map[string]formula{"ring": ringCost, "tree": treeCost, "naive": naiveCost}

// ringCost: reduce-scatter and all-gather move (W-1)/W of the data in W-1 steps each;
// Broadcast and Reduce are a pipelined chain, W-1 hops plus the pipeline's fill.
func ringCost(m CostModel, kind transport.Kind, n float64, w int) float64 {
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
	wf := float64(w)
	steps := wf - 1
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
