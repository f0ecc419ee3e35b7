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

// CostModel is the model the auto selector uses to compare algorithms. Its terms:
//
//   - Call: a fixed cost of every call (queueing, choosing, checking), the same for
//     every algorithm, so it changes predictions but never the choice;
//   - Alpha: one dependent hop (a message's wake-up and flight): the critical path's
//     messages, each of which waits for the one before;
//   - Overhead: the CPU time a rank spends on each message it sends or receives, paid
//     by the busiest rank for all of its messages, dependent or not (a root that
//     handles W-1 peers one after another pays W-1 of these, but one Alpha);
//   - Async: what a hop costs extra when it runs on goroutines (the pipelined path of
//     every algorithm above the links' EagerBytes: a receiver goroutine wakes a sender);
//   - Beta: bytes per second a rank moves over one link direction; Gamma: bytes per
//     second the reduce kernel combines (0 = free).
//
// NCCL's tuner has the same shape (latency x steps + bytes / bandwidth, reference/
// anchors.md 2.6) without the per-message term, which matters where ranks share cores:
// then the busiest rank's CPU, not the wire, is what a small collective waits for.
// Cores says how many CPU cores the ranks on one host share: with more ranks than
// cores, a collective's bytes are bounded by every rank's work spread over the cores
// (not only by the busiest rank's), and every hop waits for its receiver to get a core
// ((Alpha [+ Async]) x ranks/Cores). The numbers belong to a transport on a host; `goccl tune`
// measures them (internal/tune).
type CostModel struct {
	Call       time.Duration // every call, whatever the algorithm (the communicator's own work)
	Alpha      time.Duration // one dependent hop
	Overhead   time.Duration // one message sent or received, at the busiest rank (0 = Alpha/8)
	Async      time.Duration // extra per hop on the pipelined (goroutine) path
	Beta       float64       // bytes per second one rank moves over one link direction
	Gamma      float64       // bytes per second the reduce kernel combines (0 = free)
	ChunkBytes int           // the pipelining unit algorithms use (0 = DefaultChunkBytes)
	Cores      int           // CPU cores a host's ranks share (0 = a core per rank)
	// Polls says that a rank waiting for a message polls its links (shm, in-process)
	// instead of sleeping in the kernel (tcp): when ranks outnumber the cores, the
	// busiest rank then shares its core with ranks that wait, and its messages stretch.
	Polls bool
	// EagerBytes is the largest message the links take without a running receive
	// (transport.Eager, algos.EagerLimit; 0 = EagerBytes): every algorithm runs steps up
	// to that size in the caller's goroutine, and above it on the pipelined path.
	EagerBytes int
	// StagingBytes is each rank's part of the staging area that algos/staged passes
	// ordinary buffers through (shm.staging_bytes, which the communicator sets here; 0 =
	// DefaultStagingBytes). A window of a staged call is half a part, and every window
	// costs one or two hand-shakes.
	StagingBytes int

	// Inter prices the links between hosts when the ranks span several; nil means every
	// link is like this one (one host, or a flat network). Its Beta is what one host's
	// network link moves per direction, shared by all of that host's ranks (a NIC); the
	// fields above then price the links inside a host (shared memory, NVLink). Reduction
	// happens on the ranks, so a zero Inter.Gamma takes this model's Gamma.
	Inter *CostModel
	// PerHost is how many consecutive ranks share a host (launchers place ranks that
	// way); 0, or a value >= the world size, means one host. It only matters with Inter.
	PerHost int

	// Crowded prices a host whose ranks outnumber its Cores, where it is not nil; the
	// fields above then price a host with a core per rank. The two are different
	// machines: a rank with a core of its own sees a message as soon as the line
	// lands (0.2 us over shm), while ranks that share cores wait for one another's
	// time slices. A joint fit of both, as the built-in models were until then,
	// predicted 2 ranks over shm at 2-7x their time up to 512 KiB (BENCHMARKS.md,
	// "Speed", 32a). Only Crowded's Call, Alpha, Overhead, Async, Beta and Gamma count;
	// the shape (ChunkBytes, Cores, EagerBytes, Polls) and the hosts (Inter, PerHost)
	// are this model's. The stretch and lockstep terms apply to it as before.
	Crowded *CostModel
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

// Default models, measured on a 2-core VM (AMD EPYC Zen 3, kernel 6.18) for shared
// memory and for TCP over loopback, with the AVX2 reduce kernels. Their Crowded terms
// are the joint fits (`goccl tune --fit`) of sweeps at 2, 3 and 4 ranks that every
// earlier version used for all worlds (BENCHMARKS.md, "Choosing the algorithm"); they
// price 3 and 4 ranks on the 2 cores as before. The own-core terms are fits of four
// `goccl tune --np 2` sweeps each, with the hop's latency divided between Alpha and
// Overhead as the crowded terms divide it (2 ranks cannot tell them apart: see
// internal/tune's FitSets; BENCHMARKS.md, "Speed", 32). They are measurements of that
// machine and of this version's per-call costs, not constants to tune by hand: a host
// whose numbers differ should run `goccl tune` and set Config.TuneFile. The
// communicator fills in Cores from the host it runs on.
var (
	TCPModel = CostModel{Call: 1455 * time.Nanosecond, Overhead: 3423 * time.Nanosecond, Beta: 4.83e9, Gamma: 9.81e9,
		EagerBytes: 1 << 20, Crowded: &CostModel{Overhead: 10450 * time.Nanosecond, Beta: 2.58e9, Gamma: 10e9}}
	ShmModel = CostModel{Alpha: 318 * time.Nanosecond, Overhead: 94 * time.Nanosecond, Beta: 12.32e9, Gamma: 12.98e9,
		EagerBytes: 1 << 20, Polls: true,
		Crowded: &CostModel{Call: 400 * time.Nanosecond, Alpha: 2500 * time.Nanosecond, Overhead: 740 * time.Nanosecond,
			Async: 68 * time.Microsecond, Beta: 8.8e9, Gamma: 16.4e9}}
)

// DefaultStagingBytes is StagingBytes when a model leaves it 0: shm.staging_bytes'
// default up to 4 ranks.
const DefaultStagingBytes = 8 << 20

// RingExchangeMax is the largest input (bytes per rank) that algos/ring's AllReduce of
// two ranks swaps whole in one exchange; larger ones run the ring's two steps of half the
// input each. The exchange saves a hop and reduces the whole input on each rank, the
// ring reduces half. Over tcp on loopback, 2 ranks, goccl perf --algo auto, launches
// of this bound and of 128 KiB alternating (8 rounds, twice; medians, us), the exchange
// took 0.84x and 0.64x the two steps' time at 256 KiB (89.5 against 107.1, 93.0 against
// 144.4) and 0.76x and 0.71x at 512 KiB (136.5 against 179.1, 162.9 against 229.0).
// From 1 MiB the two steps led: interleaved with rd's exchange, they took 0.81-0.85x its
// time in 4 launches of 5, 1.10x in the fifth (BENCHMARKS.md, "Speed", 49e). The bound
// had been 128 KiB since "Speed", 44, chosen before tcp receives polled before they
// parked (44e). Over shm the ring's chunk (64 KiB) is the smaller bound.
const RingExchangeMax = 512 << 10

// RingExchange reports whether algos/ring runs an AllReduce of n bytes per rank over w
// ranks as one exchange: two ranks, one message each way (the eager size and one
// chunk), at most RingExchangeMax. Shared by the algorithm and the cost model.
func RingExchange(n, w, chunk, eager int) bool {
	return w == 2 && n <= eager && n <= chunk && n <= RingExchangeMax
}

// RDDirectMax is the largest world whose small AllReduce algos/rd runs as one direct
// exchange; RDDirect is its rule, shared by the algorithm and the cost model.
const RDDirectMax = 8

// RDDirectBytes is the largest vector that algos/rd sends whole to every other rank
// from 4 ranks on. The direct exchange sends W-1 vectors per rank in one hop, recursive
// halving and doubling 2(W-1)/W of one in 2 log2 W hops: at 4 ranks twice the bytes,
// at 8 four times. Below the eager size (1 MiB over tcp with 4 MiB socket buffers) the
// direct exchange took 1.6-4.0x halving's time from 64 KiB at 4 ranks over tcp and
// 1.8-1.9x from 256 KiB over shm, and 1.2-7.2x from 64 KiB at 6 and 8 ranks; below
// 32 KiB it was faster in some (0.54-0.95x at 4 and 6 ranks over shm) and slower in
// others (1.1-1.5x over tcp) (BENCHMARKS.md, "Speed", 47a).
const RDDirectBytes = 32 << 10

// RDDirect reports whether algos/rd runs an AllReduce of n bytes per rank over w ranks
// with pipelining unit chunk and links of eager size eager (algos.EagerLimit) as the
// one-step direct exchange (else recursive doubling or halving): one eager message,
// and from 4 ranks at most RDDirectBytes.
func RDDirect(n, w, chunk, eager int) bool {
	return w <= RDDirectMax && n <= eager && n <= chunk && (w < 4 || n <= RDDirectBytes)
}

// RDHalves reports whether algos/rd runs an AllReduce of n bytes per rank over w ranks
// that is not a direct exchange (RDDirect) as recursive halving and doubling
// (Rabenseifner's: 2(P-1)/P of the vector each way in 2 log2 P steps, P the largest
// power of two <= w) rather than recursive doubling of the whole vector (log2 P
// vectors in log2 P steps): from 4 such ranks, for a vector of more than one eager
// message or more than RDDirectBytes. At P = 2 both move the vector once each way, and
// doubling does it in one step.
func RDHalves(n, w, chunk, eager int) bool {
	return w >= 4 && (n > eager || n > chunk || n > RDDirectBytes)
}

// PairwiseOneStepMax is the largest block that algos/rd's AllGather and ReduceScatter
// send in one step (every block out, then every block in: one dependent hop); larger
// ones go step by step, a block to rank+k and one from rank-k at step k, as the ring's
// steps cost. At 3 ranks on 2 cores the one step took up to twice the ring's time from
// blocks of 21 KiB on ("Speed", 36d), while below 16 KiB it led.
const PairwiseOneStepMax = 16 << 10

// PairwiseOneStep reports whether rd runs an AllGather or ReduceScatter of n-byte blocks
// in one step; PairwiseOneStepMax, and one message each (chunk, and eager as in
// RDDirect). Shared by the algorithm and the cost model.
func PairwiseOneStep(n, chunk, eager int) bool {
	return n <= PairwiseOneStepMax && n <= chunk && n <= eager
}

// PairwiseHalves reports whether rd runs an AllGather or ReduceScatter of n-byte blocks
// over w ranks by recursive doubling or halving (log2 W steps): from 4 ranks, a power
// of two, for blocks past the one step (PairwiseOneStep). Shared by the algorithm and
// the cost model.
func PairwiseHalves(n, w, chunk, eager int) bool {
	return w >= 4 && w&(w-1) == 0 && !PairwiseOneStep(n, chunk, eager)
}

// Predict returns the model's time for alg running kind on bytes (counted as Bytes
// counts them) over world ranks. An algorithm that does not implement kind is predicted
// as the algorithm its fallback chain lands on, which is what would run. It is pure
// arithmetic and works for any world size (the tree shapes are computed, O(world), once
// per world size and layout). With Inter and PerHost (see HostModel) every algorithm is
// priced with the links its messages really cross: a ring step waits for the slower
// link, a tree's paths and a host's network link are counted from the tree shapes, and
// "hier" adds its host-local and cross-host phases. Where a host's ranks outnumber its
// Cores, Crowded's terms price them. "staged" and "direct", which the communicator takes
// by size (shm.staged_min, shm.direct_min) rather than by price, are priced for goccl
// perf --predict, and only on one host: they read memory the ranks share.
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
	perHost, hosts := m.split(world)
	if hosts > 1 && oneHost[alg] {
		return 0, fmt.Errorf("algos: %w: %s runs only when every rank is on one host (it reads memory the ranks share); "+
			"these %d ranks span %d hosts", transport.ErrNotSupported, alg, world, hosts)
	}
	m = m.at(perHost).withDefaults()
	return seconds(m.Call.Seconds() + f(m, kind, float64(bytes), world)), nil
}

// at is the model for perHost ranks on a host: Crowded's terms when they outnumber its
// cores and m has them, else m.
func (m CostModel) at(perHost int) CostModel {
	c := m.Crowded
	m.Crowded = nil
	if c == nil || m.Cores <= 0 || perHost <= m.Cores {
		return m
	}
	m.Call, m.Alpha, m.Overhead, m.Async, m.Beta, m.Gamma = c.Call, c.Alpha, c.Overhead, c.Async, c.Beta, c.Gamma
	return m
}

func (m CostModel) withDefaults() CostModel {
	if m.Alpha <= 0 && m.Beta <= 0 && m.Overhead <= 0 { // the zero model: TCP's links
		m.Alpha, m.Beta, m.Overhead = TCPModel.Alpha, TCPModel.Beta, TCPModel.Overhead
	}
	if m.Beta <= 0 {
		m.Beta = TCPModel.Beta
	}
	if m.ChunkBytes <= 0 {
		m.ChunkBytes = DefaultChunkBytes
	}
	if m.EagerBytes < EagerBytes {
		m.EagerBytes = EagerBytes // the floor every transport guarantees
	}
	if m.StagingBytes <= 0 {
		m.StagingBytes = DefaultStagingBytes
	}
	if m.Overhead <= 0 {
		// A model without a per-message cost (written before it existed, or by hand)
		// would price a root that serves 1023 peers as two hops; every message costs
		// something, and an eighth of a hop is a cautious guess (the fitted shm model
		// has 0.3).
		m.Overhead = m.Alpha / 8
	}
	return m
}

func (m CostModel) a() float64 { return m.Alpha.Seconds() }

// hop is one dependent hop among w ranks: Alpha, plus Async on the goroutine path,
// stretched by W/Cores when the ranks outnumber the cores (the receiver, process or
// goroutine, must first get one).
func (m CostModel) hop(w int, async bool) float64 {
	t := m.a()
	if async {
		t += m.Async.Seconds()
	}
	return t * m.stretch(w)
}

// stretch is how much longer anything on a critical path takes when w ranks share
// fewer cores: W/Cores, or 1.
func (m CostModel) stretch(w int) float64 {
	if m.Cores > 0 && w > m.Cores {
		return float64(w) / float64(m.Cores)
	}
	return 1
}

// lockstep scales all ranks' bytes of an algorithm whose steps wait for one another (the
// ring's 2(W-1), each a segment in the caller's goroutine) when ranks outnumber the
// cores. In such a step every rank sends and receives at once, so no core is idle for
// long enough that the kernel would move a rank onto it: some core holds ceil(W/Cores)
// of them, and every step waits for that core to do all of their work. All ranks' bytes
// then count as ceil(W/Cores) x Cores ranks' worth, not W (3 ranks on 2 cores: 4/3);
// where W/Cores is whole it changes nothing. Over shm at 3 ranks on 2 cores the ring
// measured 1.5-2x the model's time at 64-512 KiB and 1.2-1.4x at 1-2 MiB, while naive
// and rd's direct exchange, one or two steps, matched it; over tcp, whose waiting ranks
// sleep in the kernel, 6 rounds of bench/auto.sh had it 1.2x, 1.5x and 1.2x at 512 KiB,
// 1 MiB and 2 MiB, and naive 0.8-1.1x. rd's direct exchange is one such step, every
// rank sending to and receiving from all the others at once, and a later host showed
// it over shm (rdCost scales it where ranks poll): on the AMD family 25 host its time
// grew 0.65-0.81 us per KiB at 3 ranks over shm from 16 to 64 KiB in one launch,
// against the unscaled model's 0.54, and naive was faster at 32 KiB in eight of nine
// runs of bench/auto.sh (rd 1.13-1.30x in six; "Speed", 48c), so it is scaled too.
// Past the eager size the ring pipelines its chunks and its bytes come from memory,
// which every core shares: it measured 0.9-1.0x the model at 4 MiB over shm, so it is
// not scaled there (BENCHMARKS.md, "Speed", 28 and 29).
func (m CostModel) lockstep(w int) float64 {
	if m.Cores <= 0 || w <= m.Cores {
		return 1
	}
	per := (w + m.Cores - 1) / m.Cores
	return float64(per*m.Cores) / float64(w)
}

// o is the per-message CPU time.
func (m CostModel) o() float64 { return m.Overhead.Seconds() }

// load is the time for the per-message and per-byte work of a call: the busiest
// rank's messages, link traffic and reduction, or, when ranks outnumber the cores,
// every rank's spread over the cores, whichever is longer. Messages count at both
// ends (a send and its receive are two). When ranks outnumber the cores and waiting
// ranks poll (Polls), the busiest rank's messages also stretch by W/Cores: its core is
// shared with peers that spin or yield while they wait for it. This prices an uneven
// algorithm (naive's root, the tree's inner ranks) above an even one with as many
// messages in all, as measured over shm at 4 ranks on 2 cores (naive 4-5 us slower per
// call than rd's direct exchange at 2-4 KiB in bench/auto.sh's sweeps, 5-9 us at 2-8 KiB
// launched one size at a time, where the model had them within 1 us: BENCHMARKS.md,
// "Speed", 27); an even algorithm's two terms are equal. Over tcp, whose
// waiting ranks sleep in the kernel, naive stayed 1.1-1.6x faster than rd there, and
// nothing stretches. (The maxima are taken apart so the time stays linear in Overhead,
// 1/Beta and 1/Gamma, which internal/tune's fit relies on.)
func (m CostModel) load(w int, msgs, msgsAll, wire, wireAll, red, redAll float64) float64 {
	if m.Cores > 0 && w > m.Cores {
		c, busiest := float64(m.Cores), msgs
		if m.Polls {
			busiest *= m.stretch(w)
		}
		msgs, wire, red = max(busiest, msgsAll/c), max(wire, wireAll/c), max(red, redAll/c)
	}
	return msgs*m.o() + m.wire(wire) + m.red(red)
}

// serial reports whether a step of n bytes runs in the caller's goroutine (one eager
// message), as every algorithm does up to the links' eager size.
func (m CostModel) serial(n float64) bool {
	return n <= float64(m.EagerBytes) && n <= float64(m.ChunkBytes)
}

// chunks is how many messages a piece of n bytes takes.
func (m CostModel) chunks(n float64) float64 { return max(1, math.Ceil(n/float64(m.ChunkBytes))) }

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

// seconds converts a predicted time, saturating at the longest Duration: terms at
// the edge of their ranges (a tune file's bandwidth of 1e-300 bytes/s) would otherwise
// wrap round to a negative time that auto would take for the fastest.
func seconds(s float64) time.Duration {
	if ns := s * 1e9; ns < math.MaxInt64 {
		return time.Duration(ns)
	}
	return math.MaxInt64 // also NaN
}

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
	"rd":   {transport.KindAllReduce, transport.KindBarrier, transport.KindAllGather, transport.KindReduceScatter},
	"staged": {transport.KindAllReduce, transport.KindAllGather, transport.KindReduceScatter,
		transport.KindBroadcast},
	"direct": {transport.KindAllReduce, transport.KindReduceScatter, transport.KindAllGather,
		transport.KindBroadcast, transport.KindScatter, transport.KindAllToAll},
}

// oneHost lists the algorithms that read memory every rank maps, so run only on one host.
var oneHost = map[string]bool{"staged": true, "direct": true}

func natively(alg string, kind transport.Kind) bool {
	for _, k := range nativeKinds[alg] {
		if k == kind {
			return true
		}
	}
	return false
}

var formulas = map[string]formula{"ring": ringCost, "tree": treeCost, "naive": naiveCost, "hier": hierCost, "rd": rdCost,
	"staged": stagedCost, "direct": directCost}

// formulaNames lists the algorithms Predict knows, for its error message.
func formulaNames() string {
	names := make([]string, 0, len(formulas))
	for n := range formulas {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// ringCost: reduce-scatter and all-gather move (W-1)/W of the data in W-1 steps each,
// every step a send and a receive on every rank; two ranks with a small buffer swap
// it in one exchange instead (algos/ring's exchange). Broadcast and Reduce are a
// pipelined chain, W-1 hops plus the pipeline's fill.
func ringCost(m CostModel, kind transport.Kind, n float64, w int) float64 {
	if l, h := m.split(w); h > 1 {
		return ringHosts(m, kind, n, w, l, h)
	}
	wf := float64(w)
	switch kind {
	case transport.KindAllReduce:
		if RingExchange(int(n), w, m.ChunkBytes, m.EagerBytes) {
			return m.hop(w, false) + m.load(w, 2, 4, n, 2*n, n, 2*n)
		}
		// The ring runs its steps on the calling goroutine, one message each, whenever a
		// step fits the eager size, however many chunks the pipelined path would use
		// (ring's serialOK).
		seg := n / wf
		oneGoroutine := seg <= float64(m.EagerBytes)
		per := m.chunks(seg)
		if oneGoroutine {
			per = 1
		}
		msgs, ls := 4*(wf-1)*per, 1.0
		if oneGoroutine {
			ls = m.lockstep(w)
		}
		return 2*(wf-1)*m.hop(w, !oneGoroutine) +
			m.load(w, msgs, wf*msgs, 2*(wf-1)*seg, ls*2*(wf-1)*n, (wf-1)*seg, ls*(wf-1)*n)
	case transport.KindReduceScatter, transport.KindAllGather:
		return blockSteps(m, kind, n, w)
	case transport.KindBroadcast: // the first chunk's W-1 hops, a send and a receive each, then a chunk per step
		return (wf-1)*m.a() + chainMsgs(wf, m.chunks(n))*m.o() + m.wire(n+(wf-2)*m.chunk(n))
	case transport.KindReduce:
		fill := n + (wf-2)*m.chunk(n)
		return (wf-1)*m.a() + chainMsgs(wf, m.chunks(n))*m.o() + m.wire(fill) + m.red(fill)
	}
	return math.Inf(1)
}

// blockSteps prices an AllGather or ReduceScatter run as W-1 dependent steps, a block
// out and a block in on every rank each (the ring's, and rd's pairwise schedule for
// larger blocks), as AllReduce's steps are priced: one message per step while a block
// fits the eager size (then in lockstep where ranks outnumber the cores), else
// pipelined chunks.
func blockSteps(m CostModel, kind transport.Kind, n float64, w int) float64 {
	wf := float64(w)
	blk := n / wf
	oneGoroutine := blk <= float64(m.EagerBytes)
	per, ls := m.chunks(blk), 1.0
	if oneGoroutine {
		per, ls = 1, m.lockstep(w)
	}
	red, redAll := 0.0, 0.0
	if kind == transport.KindReduceScatter {
		red, redAll = (wf-1)*blk, ls*(wf-1)*n
	}
	msgs := 2 * (wf - 1) * per
	return (wf-1)*m.hop(w, !oneGoroutine) + m.load(w, msgs, wf*msgs, (wf-1)*blk, ls*(wf-1)*n, red, redAll)
}

// chainMsgs is the per-message work on a pipelined chain's critical path over w ranks:
// the first chunk's w-1 hops (a send and a receive each), then a receive and a forward
// per further chunk.
func chainMsgs(w, chunks float64) float64 { return 2 * (w - 1 + chunks - 1) }

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
		depth, sends, ch := float64(ts.depth), float64(ts.maxSends), m.chunks(half)
		// Up and down one tree's depth: the two trees run side by side (pipelined) or
		// interleaved slot by slot (one chunk each, in the caller's goroutine).
		hops, async := 2*depth, !m.serial(math.Ceil(half))
		// Every send of a rank has a receive beside it (up with down, per tree); each
		// tree edge carries a chunk up and one down. The pipeline's fill (a chunk up and
		// down every level before the last chunk can start) is latency, in series with
		// the throughput, and stretched like every hop when ranks outnumber cores.
		fill := 2 * depth * m.wire(m.chunk(half)) * m.stretch(w)
		return hops*m.hop(w, async) + fill + m.load(w, 2*sends*ch, 8*float64(w-1)*ch,
			sends*half, 2*float64(w-1)*n, float64(ts.maxChildren)*half, float64(w-1)*n)
	case transport.KindReduce: // lg dependent hops, each a send and a receive on the critical path
		return lg*m.hop(w, false) + 2*lg*m.chunks(n)*m.o() + m.wire(lg*n) + m.red(lg*n)
	case transport.KindBroadcast:
		return lg*m.a() + 2*lg*m.chunks(n)*m.o() + m.wire(lg*n)
	case transport.KindBarrier:
		// Up and down the binomial tree: 2 lg dependent hops, each a send and a receive on
		// the path (which the busiest rank's load, the root's 2 lg, does not cover).
		return 2*lg*m.hop(w, false) + math.Max(4*lg*m.o(), m.load(w, 2*lg, 4*float64(w-1), 0, 0, 0, 0))
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
		// Two hops (in to the root, out again), whatever W: the leaves send at once and
		// the root takes their messages one after another, which is per-message CPU:
		// 2(W-1) messages at the root, in series with a leaf's send and receive.
		msgs := 2 * steps * m.chunks(n)
		return 2*min(steps, 1)*m.hop(w, !m.serial(n)) + m.load(w, msgs+2, 2*msgs, steps*n, 2*steps*n, steps*n, steps*n)
	case transport.KindReduce:
		// One hop, whatever W: the leaves send at once, and the root takes their
		// messages one after another (per-message CPU), after a leaf's send. Priced
		// as W-1 hops in a row instead, auto ran the tree's two dependent hops at 4
		// ranks, 1.7-2.6x naive's time below 8 KiB (BENCHMARKS.md, "Speed", 21).
		return min(steps, 1)*m.hop(w, false) + steps*m.chunks(n)*m.o() + m.o() + m.wire(steps*n) + m.red(steps*n)
	case transport.KindBroadcast:
		return steps*(m.a()+m.chunks(n)*m.o()) + m.o() + m.wire(steps*n)
	case transport.KindAllGather, transport.KindReduceScatter:
		// AllGather gathers the W blocks at the root and sends the whole buffer to
		// everyone; ReduceScatter sends every rank's whole input to the root, which
		// reduces them and sends each rank its block. Two hops, as AllReduce: the leaves
		// send at once and the root takes their messages one after another, and its
		// bytes in and out overlap on full-duplex links (the larger direction counts).
		in, red := n/wf, 0.0
		if kind == transport.KindReduceScatter {
			in, red = n, steps*n
		}
		out := n + n/wf - in
		msgs := steps * (m.chunks(in) + m.chunks(out))
		return 2*min(steps, 1)*m.hop(w, !m.serial(n)) +
			m.load(w, msgs+2, 2*msgs, steps*n, steps*(in+out), red, red)
	case transport.KindGather, transport.KindScatter:
		// One hop: the leaves send at once (Gather), or the root sends to one after
		// another without waiting (Scatter); on the path, the root's W-1 messages in a
		// row and a leaf's one.
		blk := n / wf
		msgs := steps * m.chunks(blk)
		return min(steps, 1)*m.hop(w, !m.serial(blk)) + m.load(w, msgs+1, 2*msgs, steps*blk, steps*blk, 0, 0)
	case transport.KindAllToAll:
		// Every rank sends its W-1 blocks, then receives the W-1 for it: one hop, and
		// 2(W-1) messages at every rank.
		blk := n / wf
		msgs := 2 * steps * m.chunks(blk)
		return min(steps, 1)*m.hop(w, !m.serial(blk)) + m.load(w, msgs, wf*msgs, steps*blk, wf*steps*blk, 0, 0)
	case transport.KindBarrier:
		// Up and down, the root one message from and to every rank: on the path a leaf's
		// send, the root's 2 x steps, and a leaf's receive.
		return 2*min(steps, 1)*m.hop(w, false) + math.Max((2+2*steps)*m.o(), m.load(w, 2*steps, 4*steps, 0, 0, 0, 0))
	case transport.KindSendRecv:
		return m.a() + 2*m.chunks(n)*m.o() + m.wire(n)
	}
	return math.Inf(1)
}

// rdCost prices algos/rd's Barrier (a direct exchange of empty messages, or
// dissemination rounds) and AllReduce: one direct exchange for small buffers (one hop,
// but 2(W-1) messages and W-1 buffers in and out of every rank), else recursive
// doubling over the largest power of two P <= W, log2 P exchanges of the whole buffer
// plus a step in and a step out for the W-P extra ranks, or from 4 ranks past one
// eager message recursive halving and doubling (RDHalves, rdHalvesCost); and
// AllGather and ReduceScatter (pairwise): one step for blocks up to
// PairwiseOneStepMax, else recursive doubling or halving over a power-of-two world from
// 4 ranks (PairwiseHalves, blockHalves) and the ring's steps over other worlds. Across
// hosts every step is priced at the slower link.
func rdCost(m CostModel, kind transport.Kind, n float64, w int) float64 {
	l, h := m.split(w)
	if h > 1 {
		m = worst(m.flat(), m.inter())
	}
	wf := float64(w)
	switch kind {
	case transport.KindAllGather, transport.KindReduceScatter:
		blk := n / wf
		if PairwiseHalves(int(blk), w, m.ChunkBytes, m.EagerBytes) {
			return blockHalves(m, kind, n, w)
		}
		if !PairwiseOneStep(int(blk), m.ChunkBytes, m.EagerBytes) {
			return blockSteps(m, kind, n, w) // as the ring's steps (across hosts at the slower link)
		}
		// One step: every rank sends each other rank a block and receives one from each,
		// (W-1)/W of the data each way as in the ring, in one hop. Across hosts a host's
		// l ranks share its network link for their blocks to the W-l ranks elsewhere.
		msgs := 2 * (wf - 1)
		wire, wireAll := (wf-1)*blk, (wf-1)*n
		if h > 1 {
			wire = max(wire, float64(l)*(wf-float64(l))*blk)
		}
		red, redAll := 0.0, 0.0
		if kind == transport.KindReduceScatter {
			red, redAll = (wf-1)*blk, (wf-1)*n
		}
		return m.hop(w, false) + m.load(w, msgs, wf*msgs, wire, wireAll, red, redAll)
	case transport.KindBarrier: // empty messages: a direct exchange, or ceil(log2 W) dependent rounds
		if w <= RDDirectMax {
			return m.hop(w, false) + m.load(w, 2*(wf-1), 2*wf*(wf-1), 0, 0, 0, 0)
		}
		r := float64(bits.Len(uint(w - 1)))
		return r*m.hop(w, false) + m.load(w, 2*r, 2*r*wf, 0, 0, 0, 0)
	case transport.KindAllReduce:
	default:
		return math.Inf(1)
	}
	if RDDirect(int(n), w, m.ChunkBytes, m.EagerBytes) {
		// One step in which every rank sends to and receives from every other at once:
		// in lockstep where ranks outnumber the cores and wait by polling (shm), as the
		// ring's steps are. Over tcp, where naive is the cheaper one there anyway, rd's
		// times at 3 ranks scattered both ways around the unscaled price (0.87-1.46x
		// naive's at 64 KiB in auto40-42-tcp), so it stays unscaled.
		ls := 1.0
		if m.Polls {
			ls = m.lockstep(w)
		}
		return m.hop(w, false) + m.load(w, 2*(wf-1), 2*wf*(wf-1), (wf-1)*n, ls*wf*(wf-1)*n, (wf-1)*n, ls*wf*(wf-1)*n)
	}
	pw := 1 << (bits.Len(uint(w)) - 1)
	lg, e := float64(bits.Len(uint(pw))-1), float64(w-pw)
	fold := 0.0
	if e > 0 {
		fold = 1
	}
	if RDHalves(int(n), w, m.ChunkBytes, m.EagerBytes) {
		return rdHalvesCost(m, n, w, pw, lg, e, fold)
	}
	steps, ch := lg+2*fold, m.chunks(n)
	return steps*m.hop(w, !m.serial(n)) + m.load(w, 2*(lg+fold)*ch, 2*(float64(pw)*lg+2*e)*ch,
		(lg+fold)*n, float64(pw)*lg*n+2*e*n, (lg+fold)*n, float64(pw)*lg*n+e*n)
}

// rdHalvesCost prices rd's recursive halving and doubling (RDHalves) over w ranks, pw
// of them a power of two (lg = log2 pw) and e = w - pw folded in (fold 1 if any): 2 lg
// dependent steps, in the k-th of each half a piece of n/2^k each way; the busiest
// rank, one that folds an extra rank in, also receives and reduces the extra's vector
// and sends the result back. Pieces past the eager size go on the pipelined path.
// Where ranks outnumber the cores and wait by polling (shm), the work stretches by
// W/Cores, as a hop does: each step is an exchange between two ranks whose pieces go
// through the link's buffer only while both run. Over shm at 4 ranks on 2 cores it took
// 1.7-1.8x the ring's time at 4 and 16 MiB (3757 and 13730 us against 2085 and 7907),
// while over tcp, whose waiting ranks sleep, it took 0.89-0.99x the ring's at 2-8 MiB
// (BENCHMARKS.md, "Speed", 37d).
func rdHalvesCost(m CostModel, n float64, w, pw int, lg, e, fold float64) float64 {
	p := float64(pw)
	moved := (p - 1) / p * n // each way, in each half
	steps := 0.0             // a rank's messages in the 2 lg steps: a send and a receive each
	for k := 1.0; k <= lg; k++ {
		steps += 4 * m.chunks(n/math.Pow(2, k))
	}
	folds := 2 * m.chunks(n) // the vector in from an extra rank and the result out, or the reverse
	msgs, msgsAll := steps+fold*folds, p*steps+2*e*folds
	wire, wireAll := 2*moved+2*fold*n, 2*p*moved+4*e*n
	red, redAll := moved+fold*n, p*moved+e*n
	work := m.load(w, msgs, msgsAll, wire, wireAll, red, redAll)
	if m.Polls {
		work *= m.stretch(w)
	}
	return (2*lg+2*fold)*m.hop(w, !m.serial(n/2)) + work
}

// blockHalves prices rd's AllGather by recursive doubling and ReduceScatter by
// recursive halving (PairwiseHalves) over w ranks, a power of two: log2 W dependent
// steps, whose pieces each way are 1, 2, ..., W/2 blocks (halving takes them largest
// first), (W-1)/W of the data in all as in the ring's W-1 steps, and as much reduced by
// a ReduceScatter. Pieces past the eager size go on the pipelined path. Where ranks
// outnumber the cores and wait by polling (shm), the work stretches by W/Cores, as
// rdHalvesCost's does: each step is an exchange between two ranks. Over tcp at 4 ranks
// an AllGather took 0.82-0.94x the ring's time at 256 KiB-16 MiB (1.07x at 512 KiB) and
// a ReduceScatter 0.73-0.87x to 2 MiB (1.15x at 512 KiB), 1.05-1.09x from 4 MiB, where
// the model prices the two equal from 8 MiB (BENCHMARKS.md, "Speed", 38a).
func blockHalves(m CostModel, kind transport.Kind, n float64, w int) float64 {
	wf := float64(w)
	blk := n / wf
	hops, msgs := 0.0, 0.0
	for piece := blk; piece < n; piece *= 2 {
		hops += m.hop(w, !m.serial(piece))
		msgs += 2 * m.chunks(piece)
	}
	wire, red := (wf-1)*blk, 0.0
	if kind == transport.KindReduceScatter {
		red = wire
	}
	work := m.load(w, msgs, wf*msgs, wire, wf*wire, red, wf*red)
	if m.Polls {
		work *= m.stretch(w)
	}
	return hops + work
}

// copied is the time a rank takes to copy c bytes itself, as staged and direct do
// through memory the ranks share. A byte over a shm link is two such copies (the
// sender's into the link's buffer, the receiver's out of it), which is what Beta was
// fitted on, so c copied bytes cost as c/2 bytes on a link.
func copied(c float64) float64 { return c / 2 }

// shakes prices hand-shakes, each a dependent hop and an empty message to and from every
// peer at every rank, with cp bytes copied (copied) and red reduced by the busiest rank
// and cpAll and redAll by all ranks: what algos/staged and algos/direct do.
func (m CostModel) shakes(w int, n, cp, cpAll, red, redAll float64) float64 {
	msgs := 2 * float64(w-1) * n
	return n*m.hop(w, false) + m.load(w, msgs, float64(w)*msgs, copied(cp), copied(cpAll), red, redAll)
}

// stagedCost prices algos/staged. The vector goes through the staging area in windows of
// half a part (StagingBytes): per window every rank copies in what its peers reduce, and
// after a hand-shake reduces its own slice or copies the others' out. AllReduce has two
// hand-shakes per window, the others one, and every call one more at exit. The bytes are
// copies each rank makes itself, not link messages (copied).
func stagedCost(m CostModel, kind transport.Kind, n float64, w int) float64 {
	wf, slot := float64(w), float64(m.StagingBytes/2)
	windows := math.Ceil(n / slot) // a ReduceScatter's window holds W blocks' stretches: n/slot too
	switch kind {
	case transport.KindAllReduce: // W-1 slices in, W-1 slices reduced into one, W slices out
		cp, red := (2*wf-1)/wf*n, (wf-1)/wf*n
		return m.shakes(w, 2*windows+1, cp, wf*cp, red, wf*red)
	case transport.KindAllGather: // its own block in and to its output, W-1 blocks out
		cp := (wf + 1) / wf * n
		return m.shakes(w, math.Ceil(n/wf/slot)+1, cp, wf*cp, 0, 0)
	case transport.KindReduceScatter: // W-1 blocks in, its own block reduced out of W
		cp := (wf - 1) / wf * n
		return m.shakes(w, windows+1, cp, wf*cp, cp, wf*cp)
	case transport.KindBroadcast: // the root copies in and to its output, the others out
		return m.shakes(w, windows+1, 2*n, (wf+1)*n, 0, 0)
	}
	return math.Inf(1)
}

// directCost prices algos/direct, which reads the peers' AllocShared buffers in place:
// hand-shakes at entry (where the buffers are) and exit (nobody reads them any more), and
// for AllReduce one between its reduce and its copies. A rank reduces its slice straight
// out of every rank's input and copies what it needs from the peers' buffers (copied).
func directCost(m CostModel, kind transport.Kind, n float64, w int) float64 {
	wf := float64(w)
	switch kind {
	case transport.KindAllReduce: // reduce slice r out of W inputs, copy the W-1 other slices
		x := (wf - 1) / wf * n
		return m.shakes(w, 3, x, wf*x, x, wf*x)
	case transport.KindReduceScatter: // block r out of W inputs
		x := (wf - 1) / wf * n
		return m.shakes(w, 2, 0, 0, x, wf*x)
	case transport.KindAllGather, transport.KindAllToAll, transport.KindBroadcast: // n bytes copied
		return m.shakes(w, 2, n, wf*n, 0, 0)
	case transport.KindScatter: // its block of the root's input
		return m.shakes(w, 2, n/wf, n, 0, 0)
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
