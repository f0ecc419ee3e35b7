package algos_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// TestPredictRingFormula checks the ring AllReduce prediction against the closed form
// Call + 2(W-1)(alpha [+ async]) + 4(W-1) chunks x overhead + 2(W-1)/W n / beta +
// (W-1)/W n / gamma, for worlds up to 1024, and the two-rank exchange (one hop, n each
// way) up to the eager size, one chunk and algos.RingExchangeMax (tcp's shape: 1 MiB
// eager, 2 MiB chunks; the exchange ends at 512 KiB, not at the eager size). The
// tolerance is 2 ns: Predict returns a Duration, whole nanoseconds.
func TestPredictRingFormula(t *testing.T) {
	base := algos.CostModel{Call: 3 * time.Microsecond, Alpha: 10 * time.Microsecond, Overhead: time.Microsecond,
		Async: 20 * time.Microsecond, Beta: 1e9, Gamma: 4e9}
	tcp := base
	tcp.EagerBytes, tcp.ChunkBytes = 1<<20, 2<<20
	for _, m := range []algos.CostModel{base, tcp} {
		eager, c := float64(algos.EagerBytes), float64(algos.DefaultChunkBytes)
		if m.EagerBytes > 0 {
			eager, c = float64(m.EagerBytes), float64(m.ChunkBytes)
		}
		for _, w := range []int{2, 3, 7, 64, 1000, 1024} {
			for _, n := range []int{0, 8, 16 << 10, 16<<10 + 64, algos.RingExchangeMax, algos.RingExchangeMax + 64, 1 << 20, 1 << 30} {
				got, err := m.Predict("ring", transport.KindAllReduce, n, w)
				require.NoError(t, err)
				wf, nf := float64(w), float64(n)
				seg := nf / wf
				var want float64
				if w == 2 && nf <= eager && n <= algos.RingExchangeMax {
					want = 3e-6 + 10e-6 + 2*1e-6 + nf/1e9 + nf/4e9
				} else {
					hop, per := 10e-6, 1.0
					if seg > eager {
						hop += 20e-6
						per = math.Ceil(seg / c)
					}
					want = 3e-6 + 2*(wf-1)*hop + 4*(wf-1)*per*1e-6 + 2*(wf-1)/wf*nf/1e9 + (wf-1)/wf*nf/4e9
				}
				require.InDelta(t, want, got.Seconds(), 2e-9*max(1, want), "eager=%v w=%d n=%d", eager, w, n)
			}
		}
	}
}

// TestPredictSmallAllReduce checks the small-message formulas against hand counts of
// hops (alpha) and of the busiest rank's messages (overhead), bytes left out: naive is
// 2 hops and 2(W-1) messages at the root after a leaf's send (and before its receive), rd's direct exchange 1 hop and 2(W-1)
// messages, recursive doubling log2 P hops (+2 when W is not a power of two), the
// double tree 2 x depth hops and 2 messages per send of its busiest rank.
func TestPredictSmallAllReduce(t *testing.T) {
	const a, o = 1e-6, 1e-3 // seconds: far apart, so each count shows on its own
	m := algos.CostModel{Alpha: time.Microsecond, Overhead: time.Millisecond, Beta: math.Inf(1)}
	for _, tc := range []struct {
		alg          string
		w            int
		hops, msgs   float64
		beyondDirect bool
	}{
		{"naive", 2, 2, 4, false}, {"naive", 4, 2, 8, false}, {"naive", 64, 2, 128, false},
		{"rd", 2, 1, 2, false}, {"rd", 3, 1, 4, false}, {"rd", 8, 1, 14, false},
		{"rd", 16, 4, 8, true}, {"rd", 13, 5, 8, true}, {"rd", 1024, 10, 20, true},
		{"ring", 2, 1, 2, false}, {"ring", 4, 6, 12, false},
		{"tree", 2, 2, 4, false}, // one edge per tree: 2 sends, 2 receives
	} {
		got, err := m.Predict(tc.alg, transport.KindAllReduce, 8, tc.w)
		require.NoError(t, err)
		require.InDelta(t, tc.hops*a+tc.msgs*o, got.Seconds(), 1e-9, "%s w=%d", tc.alg, tc.w)
		require.Equal(t, !tc.beyondDirect, tc.alg != "rd" || algos.RDDirect(8, tc.w, algos.DefaultChunkBytes, algos.EagerBytes))
	}
}

// TestPredictGatherScatter checks the ring's, naive's and rd's AllGather and
// ReduceScatter against hand counts. Small, with the terms far apart: the ring is W-1
// dependent hops and 2(W-1) messages per rank, naive 2 hops and the root's 2(W-1)
// messages plus a leaf's 2, rd one hop and 2(W-1) messages per rank. On 2 cores with polling ranks at W = 4 every hop and the busiest rank's
// messages stretch by W/2: the ring's 12 messages, the same as all ranks' 24 over 2
// cores, and naive's root 16. Bytes alone (n of the whole world's data): the ring and
// rd move (W-1)/W n through every rank and ReduceScatter reduces as much, and naive's
// root sends W-1 whole buffers (AllGather) or receives and reduces W-1 whole inputs
// (ReduceScatter), the larger direction of its full-duplex links.
func TestPredictGatherScatter(t *testing.T) {
	const a, o = 1e-6, 1e-3
	counts := algos.CostModel{Alpha: time.Microsecond, Overhead: time.Millisecond, Beta: math.Inf(1)}
	crowded := counts
	crowded.Cores, crowded.Polls = 2, true
	const beta, gamma = 1e9, 4e9
	bytes := algos.CostModel{Beta: beta, Gamma: gamma} // no Alpha, so no Overhead either
	for _, k := range []transport.Kind{transport.KindAllGather, transport.KindReduceScatter} {
		for _, tc := range []struct {
			alg        string
			w          int
			m          algos.CostModel
			hops, msgs float64
		}{
			{"ring", 2, counts, 1, 2}, {"ring", 3, counts, 2, 4}, {"ring", 64, counts, 63, 126},
			{"naive", 2, counts, 2, 4}, {"naive", 3, counts, 2, 6}, {"naive", 64, counts, 2, 128},
			{"ring", 4, crowded, 6, 12}, {"naive", 4, crowded, 4, 16},
			{"rd", 2, counts, 1, 2}, {"rd", 3, counts, 1, 4}, {"rd", 64, counts, 1, 126}, {"rd", 4, crowded, 2, 12},
		} {
			got, err := tc.m.Predict(tc.alg, k, 8*tc.w, tc.w)
			require.NoError(t, err)
			require.InDelta(t, tc.hops*a+tc.msgs*o, got.Seconds(), 1e-9, "%s %s w=%d cores=%d", tc.alg, k, tc.w, tc.m.Cores)
		}
		for _, w := range []int{2, 3, 4, 16} {
			for _, n := range []int{0, 1 << 20, 64 << 20} {
				wf, nf := float64(w), float64(n)
				ring, naive := (wf-1)/wf*nf/beta, (wf-1)*nf/beta
				if k == transport.KindReduceScatter {
					ring += (wf - 1) / wf * nf / gamma
					naive += (wf - 1) * nf / gamma
				}
				for alg, want := range map[string]float64{"ring": ring, "naive": naive, "rd": ring} {
					got, err := bytes.Predict(alg, k, n, w)
					require.NoError(t, err)
					require.InDelta(t, want, got.Seconds(), 1e-6*max(want, 1e-3), "%s %s w=%d n=%d", alg, k, w, n)
				}
			}
		}
	}
	// The built-in shm model on 2 cores: at 4 ranks naive is cheaper than the ring for
	// small AllGathers and ReduceScatters, and rd's one step (pairwise) cheaper than
	// both at 3 and 4 ranks; at 2 ranks all three are the one exchange and the ring is
	// no dearer (BENCHMARKS.md, "Speed", 36a and 36d).
	shm := algos.ShmModel
	shm.Cores = 2
	price := func(alg string, k transport.Kind, n, w int) time.Duration {
		p, err := shm.Predict(alg, k, n, w)
		require.NoError(t, err)
		return p
	}
	for _, k := range []transport.Kind{transport.KindAllGather, transport.KindReduceScatter} {
		for _, n := range []int{64, 4 << 10} {
			require.Less(t, price("naive", k, n, 4), price("ring", k, n, 4), "%s %d bytes, 4 ranks", k, n)
		}
		require.Less(t, price("ring", k, 64<<10, 4), price("naive", k, 64<<10, 4), "%s 64 KiB, 4 ranks", k)
		for _, w := range []int{3, 4} {
			for _, blk := range []int{8, 4 << 10, algos.PairwiseOneStepMax} {
				require.Less(t, price("rd", k, blk*w, w), min(price("ring", k, blk*w, w), price("naive", k, blk*w, w)),
					"%s %d bytes, %d ranks", k, blk*w, w)
			}
			// Larger blocks go step by step, as the ring's, at 3 ranks; at 4 by doubling
			// or halving, whose exchanges between pairs of polling ranks stretch by
			// W/Cores, so that the ring stays cheaper over shm on 2 cores (BENCHMARKS.md,
			// "Speed", 38a).
			blk := algos.PairwiseOneStepMax + 4
			if w == 3 {
				require.Equal(t, price("ring", k, blk*w, w), price("rd", k, blk*w, w), "%s %d-byte blocks, %d ranks", k, blk, w)
			} else {
				require.Less(t, price("ring", k, blk*w, w), price("rd", k, blk*w, w), "%s %d-byte blocks, %d ranks", k, blk, w)
			}
		}
		require.LessOrEqual(t, price("ring", k, 1<<10, 2), price("rd", k, 1<<10, 2))
	}
}

// TestPredictNaiveOneHop checks naive's Gather, Scatter and AllToAll against hand
// counts: one hop each, since no send waits for a receive (the leaves send at once, the
// root sends to one after another, every rank sends all its blocks before it receives);
// on the path the root's W-1 messages and a leaf's one (Gather, Scatter), or every
// rank's W-1 sends and W-1 receives (AllToAll). Bytes: the root's W-1 blocks, or a
// rank's W-1 blocks out (and as many in, at the same time).
func TestPredictNaiveOneHop(t *testing.T) {
	const a, o = 1e-6, 1e-3
	counts := algos.CostModel{Alpha: time.Microsecond, Overhead: time.Millisecond, Beta: math.Inf(1)}
	bytes := algos.CostModel{Beta: 1e9} // no Alpha, so no Overhead either
	for _, w := range []int{2, 3, 4, 64} {
		wf := float64(w)
		for k, msgs := range map[transport.Kind]float64{
			transport.KindGather: wf, transport.KindScatter: wf, transport.KindAllToAll: 2 * (wf - 1),
		} {
			got, err := counts.Predict("naive", k, 8*w, w)
			require.NoError(t, err)
			require.InDelta(t, a+msgs*o, got.Seconds(), 1e-9, "%s w=%d", k, w)
			const n = 64 << 20
			got, err = bytes.Predict("naive", k, n, w)
			require.NoError(t, err)
			want := (wf - 1) * n / wf / 1e9
			require.InDelta(t, want, got.Seconds(), 1e-6*want, "%s w=%d bytes", k, w)
		}
	}
}

// TestPredictOversubscribed: with more ranks than cores, a hop waits for a core
// (alpha x W/cores) and the bytes of all ranks share the cores; with enough cores the
// model is the plain one.
func TestPredictOversubscribed(t *testing.T) {
	plain := algos.CostModel{Alpha: 10 * time.Microsecond, Overhead: time.Microsecond, Beta: 1e9, Gamma: 2e9}
	two := plain
	two.Cores = 2
	for _, w := range []int{2, 3, 4, 8} {
		for _, n := range []int{8, 1 << 24} {
			p, err := plain.Predict("ring", transport.KindAllReduce, n, w)
			require.NoError(t, err)
			c, err := two.Predict("ring", transport.KindAllReduce, n, w)
			require.NoError(t, err)
			if w <= 2 {
				require.Equal(t, p, c, "w=%d n=%d", w, n)
				continue
			}
			wf, nf, f := float64(w), float64(n), float64(w)/2
			hop := 10e-6 * f
			if nf/wf > algos.EagerBytes {
				hop = 10e-6*f + algos.ShmModel.Async.Seconds()*0 // Async is zero in this model
			}
			chunks := max(1, math.Ceil(nf/wf/float64(algos.DefaultChunkBytes)))
			// Serial steps (segments within the eager size) wait for the core that holds
			// ceil(W/2) ranks: their bytes count ceil(W/2) x 2 ranks, not W.
			ls := 1.0
			if nf/wf <= algos.EagerBytes {
				ls = math.Ceil(wf/2) * 2 / wf
			}
			want := 2*(wf-1)*hop + f*4*(wf-1)*chunks*1e-6 + f*ls*(2*(wf-1)/wf*nf/1e9+(wf-1)/wf*nf/2e9)
			require.InDelta(t, want, c.Seconds(), 1e-9*max(1, want), "w=%d n=%d", w, n)
			// The root of naive does most of its work itself: spreading every rank's bytes
			// over the cores costs it less than it costs the ring.
			np, _ := plain.Predict("naive", transport.KindAllReduce, n, w)
			nc, _ := two.Predict("naive", transport.KindAllReduce, n, w)
			require.Less(t, float64(nc)/float64(np), float64(c)/float64(p), "w=%d n=%d", w, n)
		}
	}
}

// TestPredictPolls: where waiting ranks poll, the busiest rank's messages stretch by
// W/cores. The ring's ranks all do the same, so it is priced as with sleeping ranks
// (its lock-stepped bytes too: TestPredictLockstep); naive's root handles 2(W-1)
// messages plus a leaf's 2, so an 8-byte naive AllReduce costs (2W x W/2 - 2W) messages
// more at 2 cores (its 4(W-1) messages over 2 cores were less).
func TestPredictPolls(t *testing.T) {
	two := algos.CostModel{Alpha: 10 * time.Microsecond, Overhead: time.Microsecond, Beta: 1e9, Gamma: 2e9, Cores: 2}
	polls := two
	polls.Polls = true
	for _, w := range []int{2, 3, 4, 8} {
		r0, err := two.Predict("ring", transport.KindAllReduce, 1<<20, w)
		require.NoError(t, err)
		r1, err := polls.Predict("ring", transport.KindAllReduce, 1<<20, w)
		require.NoError(t, err)
		require.InDelta(t, r0.Seconds(), r1.Seconds(), 1e-9, "ring, w=%d", w)
		n0, err := two.Predict("naive", transport.KindAllReduce, 8, w)
		require.NoError(t, err)
		n1, err := polls.Predict("naive", transport.KindAllReduce, 8, w)
		require.NoError(t, err)
		wf := float64(w)
		want := 0.0
		if w > 2 {
			want = (wf*wf - 2*wf) * 1e-6
		}
		require.InDelta(t, want, (n1 - n0).Seconds(), 1e-9, "naive, w=%d", w)
	}
}

// TestPredictLockstep: where ranks outnumber the cores, the ring's steps wait for the
// core that holds ceil(W/cores) ranks, whether waiting ranks poll or sleep. On its
// serial path (segments within the eager size, one message per step, so the message
// terms do not depend on n) its bytes and reduction cost (W-1) n ceil(W/C)/W x
// (2/Beta + 1/Gamma) above the empty call: all ranks' 2(W-1) n bytes and (W-1) n of
// reduction spread over ceil(W/C) x C rank-slots on C cores. With a core per rank
// (ceil = 1) that is the busiest rank's own 2(W-1) segments of n/W; past the eager size
// the ring pipelines its chunks and is not scaled (1/C per rank-byte, not ceil(W/C)/W).
func TestPredictLockstep(t *testing.T) {
	const beta, gamma = 1e9, 2e9
	for _, tc := range []struct{ w, cores, n int }{
		{3, 2, 0}, {3, 2, 1}, {3, 2, 1001}, {3, 2, 256 << 10}, {3, 2, 3 << 20}, {3, 2, 3<<20 + 64}, {3, 2, 64 << 20},
		{5, 2, 512 << 10}, {7, 2, 4 << 20}, {5, 4, 64 << 10}, {4, 2, 512 << 10}, {8, 2, 1 << 20}, {3, 4, 256 << 10}, {2, 1, 128 << 10},
	} {
		for _, polls := range []bool{false, true} {
			m := algos.CostModel{Alpha: 10 * time.Microsecond, Overhead: time.Microsecond, Beta: beta, Gamma: gamma,
				Cores: tc.cores, EagerBytes: 1 << 20, ChunkBytes: 1 << 20, Polls: polls}
			w, c, n := float64(tc.w), float64(tc.cores), float64(tc.n)
			if n/w > 1<<20 {
				// Past the eager size: polling or not, the same price.
				other := m
				other.Polls = !polls
				a, err := m.Predict("ring", transport.KindAllReduce, tc.n, tc.w)
				require.NoError(t, err)
				b, err := other.Predict("ring", transport.KindAllReduce, tc.n, tc.w)
				require.NoError(t, err)
				require.Equal(t, a, b, "w=%d cores=%d n=%d", tc.w, tc.cores, tc.n)
				continue
			}
			full, err := m.Predict("ring", transport.KindAllReduce, tc.n, tc.w)
			require.NoError(t, err)
			empty, err := m.Predict("ring", transport.KindAllReduce, 0, tc.w)
			require.NoError(t, err)
			want := (w - 1) * n * math.Ceil(w/c) / w * (2/beta + 1/gamma)
			if tc.w == 2 { // up to algos.RingExchangeMax
				want = n * math.Ceil(w/c) * (1/beta + 1/gamma) // two ranks swap the whole buffer in one exchange
			}
			require.InDelta(t, want, (full - empty).Seconds(), 2e-9, "w=%d cores=%d n=%d polls=%v", tc.w, tc.cores, tc.n, polls)
		}
	}
}

// TestPredictRDDirectLockstep: rd's direct exchange (every rank sends its vector to
// every other and reduces theirs in one step) costs (W-1) n (1/Beta + 1/Gamma) above the
// empty call with a core per rank. Where ranks outnumber the cores, all ranks' W(W-1) n
// spread over the cores: W/C times that when waiting ranks sleep (tcp), and, when they
// poll (shm), ceil(W/C) times, the step waiting for the core that holds the most ranks,
// as the ring's steps do (TestPredictLockstep).
func TestPredictRDDirectLockstep(t *testing.T) {
	const beta, gamma = 1e9, 2e9
	for _, tc := range []struct{ w, cores, n int }{
		{3, 2, 1}, {3, 2, 1001}, {3, 2, 32 << 10}, {3, 2, 1 << 20}, {5, 2, 32 << 10}, {7, 2, 30001},
		{4, 2, 32 << 10}, {3, 4, 64 << 10}, {2, 1, 4096}, {3, 0, 64 << 10},
	} {
		for _, polls := range []bool{false, true} {
			m := algos.CostModel{Alpha: 10 * time.Microsecond, Overhead: time.Microsecond, Beta: beta, Gamma: gamma,
				Cores: tc.cores, EagerBytes: 1 << 20, ChunkBytes: 1 << 20, Polls: polls}
			require.True(t, algos.RDDirect(tc.n, tc.w, m.ChunkBytes, m.EagerBytes), "w=%d n=%d: the case this covers", tc.w, tc.n)
			full, err := m.Predict("rd", transport.KindAllReduce, tc.n, tc.w)
			require.NoError(t, err)
			empty, err := m.Predict("rd", transport.KindAllReduce, 0, tc.w)
			require.NoError(t, err)
			w, c, n := float64(tc.w), float64(tc.cores), float64(tc.n)
			spread := 1.0
			switch {
			case tc.cores == 0 || tc.w <= tc.cores:
			case polls:
				spread = math.Ceil(w / c)
			default:
				spread = w / c
			}
			want := spread * (w - 1) * n * (1/beta + 1/gamma)
			require.InDelta(t, want, (full - empty).Seconds(), 2e-9*max(1, want*1e6), "w=%d cores=%d n=%d polls=%v", tc.w, tc.cores, tc.n, polls)
		}
	}
}

// TestPredictCrowded: a model with Crowded terms prices a host whose ranks outnumber its
// cores exactly as a model made of those terms and its own shape, and any other world
// (a core per rank, no cores given, or hosts of few enough ranks) as if it had none;
// Crowded's own shape fields count for nothing.
func TestPredictCrowded(t *testing.T) {
	own := algos.CostModel{Call: 100 * time.Nanosecond, Alpha: 300 * time.Nanosecond, Overhead: 100 * time.Nanosecond,
		Beta: 12e9, Gamma: 13e9, EagerBytes: 1 << 20, ChunkBytes: 2 << 20, Cores: 2, Polls: true}
	terms := algos.CostModel{Call: 400 * time.Nanosecond, Alpha: 2500 * time.Nanosecond, Overhead: 740 * time.Nanosecond,
		Async: 68 * time.Microsecond, Beta: 8.8e9, Gamma: 16.4e9}
	m := own
	c := terms
	c.Cores, c.ChunkBytes, c.EagerBytes, c.Polls = 64, 1, 1, false // ignored
	m.Crowded = &c
	crowded := own // own's shape, terms' numbers
	crowded.Call, crowded.Alpha, crowded.Overhead, crowded.Async, crowded.Beta, crowded.Gamma =
		terms.Call, terms.Alpha, terms.Overhead, terms.Async, terms.Beta, terms.Gamma
	noCores := m
	noCores.Cores = 0
	plainNoCores := own
	plainNoCores.Cores = 0
	for _, alg := range []string{"ring", "tree", "naive", "rd", "staged", "direct"} {
		for _, k := range transport.Kinds {
			for _, n := range []int{8, 64 << 10, 4 << 20, 64 << 20} {
				for _, w := range []int{2, 3, 4, 16} {
					want := own
					if w > own.Cores {
						want = crowded
					}
					exp, err := want.Predict(alg, k, n, w)
					require.NoError(t, err)
					got, err := m.Predict(alg, k, n, w)
					require.NoError(t, err)
					require.Equal(t, exp, got, "%s %s %d bytes over %d ranks on 2 cores", alg, k, n, w)
					exp, err = plainNoCores.Predict(alg, k, n, w)
					require.NoError(t, err)
					got, err = noCores.Predict(alg, k, n, w)
					require.NoError(t, err)
					require.Equal(t, exp, got, "no cores given: a core per rank, %s %s %d bytes over %d ranks", alg, k, n, w)
				}
			}
		}
	}
	// Across hosts the ranks on one host decide: 8 ranks, 2 to a host of 2 cores, are
	// not crowded; 4 to a host are, and their host-local phases take Crowded's terms.
	for _, tc := range []struct {
		perHost int
		intra   algos.CostModel
	}{{2, own}, {4, crowded}} {
		withCrowded := algos.HostModel(m, algos.TCPModel, algos.Layout{Hosts: 8 / tc.perHost, PerHost: tc.perHost})
		want := algos.HostModel(tc.intra, algos.TCPModel, algos.Layout{Hosts: 8 / tc.perHost, PerHost: tc.perHost})
		for _, alg := range []string{"ring", "tree", "naive", "hier"} {
			for _, n := range []int{8, 4 << 20} {
				exp, err := want.Predict(alg, transport.KindAllReduce, n, 8)
				require.NoError(t, err)
				got, err := withCrowded.Predict(alg, transport.KindAllReduce, n, 8)
				require.NoError(t, err)
				require.Equal(t, exp, got, "%s, %d bytes, %d ranks to a host", alg, n, tc.perHost)
			}
		}
	}
	// Hierarchical phases choose ring or tree with the terms of their own world (and the
	// two sets of terms do choose differently somewhere in this sweep).
	differ := 0
	for _, k := range []transport.Kind{transport.KindReduce, transport.KindBroadcast, transport.KindAllReduce} {
		for n := 8; n <= 256<<20; n *= 4 {
			for _, w := range []int{2, 3, 4, 8, 32} {
				want := own
				if w > own.Cores {
					want = crowded
				}
				require.Equal(t, algos.PhaseAlgo(want, k, n, w), algos.PhaseAlgo(m, k, n, w), "%s %d bytes over %d ranks", k, n, w)
				if algos.PhaseAlgo(own, k, n, w) != algos.PhaseAlgo(crowded, k, n, w) {
					differ++
				}
			}
		}
	}
	require.Positive(t, differ)
	// The built-in models are two machines each: the crowded terms are the ones fitted
	// to 3 and 4 ranks on 2 cores, far slower per hop than a core per rank.
	for _, b := range []algos.CostModel{algos.ShmModel, algos.TCPModel} {
		require.NotNil(t, b.Crowded)
		b.Cores = 2
		two, err := b.Predict("ring", transport.KindAllReduce, 8, 2)
		require.NoError(t, err)
		four, err := b.Predict("ring", transport.KindAllReduce, 8, 4)
		require.NoError(t, err)
		require.Greater(t, float64(four), 3*float64(two))
	}
}

// TestPredictStagedDirect holds staged's and direct's prices to the count of what each
// rank does, from their package comments: hand-shakes (a hop, and W-1 empty messages to
// and from every peer at every rank), bytes a rank copies itself (two of them cost a
// link byte), and bytes it reduces. Staged's windows are half a staging part of the
// vector (of one block for AllGather; the same stretch of all W blocks for
// ReduceScatter). Where ranks outnumber the cores, an even collective costs W/Cores
// times as much past the call; Broadcast's root copies twice what the others do.
func TestPredictStagedDirect(t *testing.T) {
	const alpha, over, beta, gamma, call = 3e-6, 0.5e-6, 1e9, 2e9, 1e-6
	type price struct{ shakes, cp, red float64 }
	staged := func(k transport.Kind, n, w, slot float64) price {
		switch k {
		case transport.KindAllReduce:
			return price{2*math.Ceil(n/slot) + 1, (2*w - 1) * n / w, (w - 1) * n / w}
		case transport.KindAllGather:
			return price{math.Ceil(n/w/slot) + 1, (w + 1) * n / w, 0}
		case transport.KindReduceScatter:
			return price{math.Ceil(n/slot) + 1, (w - 1) * n / w, (w - 1) * n / w}
		}
		return price{math.Ceil(n/slot) + 1, 2 * n, 0} // Broadcast, at the root
	}
	direct := func(k transport.Kind, n, w, _ float64) price {
		switch k {
		case transport.KindAllReduce:
			return price{3, (w - 1) * n / w, (w - 1) * n / w}
		case transport.KindReduceScatter:
			return price{2, 0, (w - 1) * n / w}
		case transport.KindScatter:
			return price{2, n / w, 0}
		}
		return price{2, n, 0} // AllGather, AllToAll, Broadcast
	}
	for _, tc := range []struct {
		alg   string
		kinds []transport.Kind
		count func(k transport.Kind, n, w, slot float64) price
	}{
		{"staged", []transport.Kind{transport.KindAllReduce, transport.KindAllGather, transport.KindReduceScatter, transport.KindBroadcast}, staged},
		{"direct", []transport.Kind{transport.KindAllReduce, transport.KindReduceScatter, transport.KindAllGather,
			transport.KindBroadcast, transport.KindScatter, transport.KindAllToAll}, direct},
	} {
		for _, staging := range []int{0, 1 << 20} {
			m := algos.CostModel{Call: seconds(call), Alpha: seconds(alpha), Overhead: seconds(over), Beta: beta, Gamma: gamma,
				StagingBytes: staging}
			slot := float64(algos.DefaultStagingBytes / 2)
			if staging > 0 {
				slot = float64(staging / 2)
			}
			for _, k := range tc.kinds {
				for _, w := range []int{2, 3, 5, 8} {
					for _, n := range []int{0, 1, 1001, 512 << 10, 512<<10 + 40, 3<<20 + 120, 64 << 20} {
						p := tc.count(k, float64(n), float64(w), slot)
						want := call + p.shakes*(alpha+2*float64(w-1)*over) + p.cp/2/beta + p.red/gamma
						got, err := m.Predict(tc.alg, k, n, w)
						require.NoError(t, err)
						require.InDelta(t, want, got.Seconds(), 2e-9, "%s %s, %d bytes over %d ranks, staging %d", tc.alg, k, n, w, staging)
						// Two cores: every hop waits W/2 times as long, and every rank's
						// work is spread over the two.
						crowded := m
						crowded.Cores = 2
						got, err = crowded.Predict(tc.alg, k, n, w)
						require.NoError(t, err)
						if w > 2 && k != transport.KindBroadcast {
							want = call + float64(w)/2*(want-call)
						}
						if w > 2 && k == transport.KindBroadcast {
							wf, nf := float64(w), float64(n)
							cp := max(p.cp, (wf+1)*nf/2) // the root's copies, or all ranks' over the cores
							if tc.alg == "direct" {
								cp = wf * nf / 2
							}
							want = call + wf/2*p.shakes*(alpha+2*(wf-1)*over) + cp/2/beta
						}
						require.InDelta(t, want, got.Seconds(), 2e-9, "%s %s, %d bytes over %d ranks on 2 cores", tc.alg, k, n, w)
					}
				}
			}
		}
		// A collective it does not implement is priced as what would run instead.
		for _, k := range []transport.Kind{transport.KindReduce, transport.KindGather, transport.KindBarrier, transport.KindSendRecv} {
			if slices.Contains(tc.kinds, k) {
				continue
			}
			fb := "ring"
			if k != transport.KindReduce {
				fb = "naive"
			}
			want, err := algos.ShmModel.Predict(fb, k, 4<<20, 4)
			require.NoError(t, err)
			got, err := algos.ShmModel.Predict(tc.alg, k, 4<<20, 4)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s %s falls back to %s", tc.alg, k, fb)
		}
		// Both read memory the ranks share, so neither runs across hosts.
		_, err := spanning(4).Predict(tc.alg, transport.KindAllReduce, 1<<20, 8)
		require.ErrorIs(t, err, transport.ErrNotSupported)
		require.ErrorContains(t, err, tc.alg+" runs only when every rank is on one host")
		require.ErrorContains(t, err, "these 8 ranks span 2 hosts")
	}
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

func TestPredictShape(t *testing.T) {
	m := algos.TCPModel
	for _, name := range []string{"ring", "tree", "naive", "staged", "direct"} {
		for _, k := range transport.Kinds {
			for _, w := range []int{1, 2, 5, 128, 1024} {
				prev := time.Duration(-1)
				for _, n := range []int{0, 8, 4 << 10, 1 << 20, 64 << 20, 1 << 30} {
					got, err := m.Predict(name, k, n, w)
					require.NoError(t, err)
					require.GreaterOrEqual(t, got, prev, "%s %s w=%d: time must not fall as bytes grow", name, k, w)
					require.Less(t, got, time.Duration(math.MaxInt64/2), "%s %s w=%d n=%d: finite", name, k, w, n)
					if w == 1 {
						require.Zero(t, got, "one rank is a local copy")
					}
					prev = got
				}
			}
		}
	}
	// More ranks cost more steps for the ring, only log W more for the tree (past the
	// call's fixed cost, which every algorithm pays once).
	r8, _ := m.Predict("ring", transport.KindAllReduce, 8, 8)
	r1024, _ := m.Predict("ring", transport.KindAllReduce, 8, 1024)
	t8, _ := m.Predict("tree", transport.KindAllReduce, 8, 8)
	t1024, _ := m.Predict("tree", transport.KindAllReduce, 8, 1024)
	steps := func(d time.Duration) float64 { return float64(d - m.Call) }
	require.InDelta(t, 1023.0/7, steps(r1024)/steps(r8), 1)
	require.Less(t, steps(t1024)/steps(t8), 4.0)
}

func TestPredictErrors(t *testing.T) {
	_, err := algos.TCPModel.Predict("bogus", transport.KindAllReduce, 8, 2)
	require.ErrorContains(t, err, `no cost formula for algorithm "bogus"`)
	_, err = algos.TCPModel.Predict("ring", transport.KindAllReduce, 8, 0)
	require.ErrorIs(t, err, transport.ErrInvalid)
	_, err = algos.TCPModel.Predict("ring", transport.KindAllReduce, -1, 4)
	require.ErrorIs(t, err, transport.ErrInvalid)
	z, err := algos.CostModel{}.Predict("ring", transport.KindAllReduce, 1<<20, 4)
	require.NoError(t, err)
	tcp, _ := algos.TCPModel.Predict("ring", transport.KindAllReduce, 1<<20, 4)
	require.LessOrEqual(t, z, tcp, "the zero model is TCP's alpha, beta and overhead without the reduce term")
}

// Models for the multi-host tests: NVLink-like links inside a host, a 100 Gb/s network
// between hosts (what one host's NIC moves per direction).
var (
	nvlink = algos.CostModel{Alpha: 2 * time.Microsecond, Overhead: 250 * time.Nanosecond, Beta: 150e9, Gamma: 400e9}
	ib100  = algos.CostModel{Alpha: 5 * time.Microsecond, Overhead: 500 * time.Nanosecond, Beta: 12.5e9}
)

func spanning(perHost int) algos.CostModel {
	return algos.HostModel(nvlink, ib100, algos.Layout{Hosts: 2, PerHost: perHost})
}

func TestHostModel(t *testing.T) {
	require.Equal(t, nvlink, algos.HostModel(nvlink, ib100, algos.Layout{Hosts: 1, PerHost: 8}), "one host: intra")
	// A host per rank: every link is a network link, and the ranks still reduce at the
	// intra model's speed.
	own := algos.HostModel(nvlink, ib100, algos.Layout{Hosts: 4, PerHost: 1})
	flat := ib100
	flat.Gamma = nvlink.Gamma
	for _, alg := range []string{"ring", "tree", "naive"} {
		for _, k := range transport.Kinds {
			for _, n := range []int{0, 8, 1 << 20, 1 << 28} {
				got, err := own.Predict(alg, k, n, 4)
				require.NoError(t, err)
				want, err := flat.Predict(alg, k, n, 4)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s %s n=%d", alg, k, n)
			}
		}
	}
	for _, n := range []int{8, 1 << 20, 1 << 28} {
		got, err := own.Predict("hier", transport.KindAllReduce, n, 4)
		require.NoError(t, err)
		want, err := flat.Predict(algos.PhaseAlgo(flat, transport.KindAllReduce, n, 4), transport.KindAllReduce, n, 4)
		require.NoError(t, err)
		require.Equal(t, want, got, "hier with a host per rank is the leaders' AllReduce alone, n=%d", n)
	}
	m := spanning(8)
	require.NotNil(t, m.Inter)
	require.Equal(t, 8, m.PerHost)
	require.Equal(t, nvlink.Alpha, m.Alpha)
	require.Equal(t, ib100.Beta, m.Inter.Beta)

	require.Equal(t, algos.Layout{Hosts: 2, PerHost: 3}, algos.LayoutOf([]string{"a", "a", "b", "a", "b"}))
	require.True(t, algos.LayoutOf([]string{"a", "a", "b"}).Spans())
	require.False(t, algos.LayoutOf([]string{"a", "b", "c"}).Spans(), "one rank per host: nothing to keep local")
	require.False(t, algos.LayoutOf([]string{"a", "a"}).Spans(), "one host")
}

// TestPredictAcrossHosts checks the multi-host formulas against closed forms worked out
// by hand for each shape (W ranks, L per host, H hosts, c the chunk).
func TestPredictAcrossHosts(t *testing.T) {
	ai, bi, g, oi := nvlink.Alpha.Seconds(), nvlink.Beta, nvlink.Gamma, nvlink.Overhead.Seconds()
	ae, be, oe := ib100.Alpha.Seconds(), ib100.Beta, ib100.Overhead.Seconds()
	chunks := func(n float64) float64 { return max(1, math.Ceil(n/float64(algos.DefaultChunkBytes))) }
	c := float64(algos.DefaultChunkBytes)
	for _, tc := range []struct{ w, l int }{{16, 8}, {1024, 8}, {12, 4}, {9, 4}} {
		m := spanning(tc.l)
		w, l := float64(tc.w), float64(tc.l)
		h := float64((tc.w + tc.l - 1) / tc.l)
		for _, n := range []float64{0, 8, 1 << 20, 1 << 30} {
			check := func(alg string, k transport.Kind, want float64) {
				t.Helper()
				got, err := m.Predict(alg, k, int(n), tc.w)
				require.NoError(t, err)
				require.InDelta(t, want, got.Seconds(), 1e-9*max(1, want), "%s %s w=%d l=%d n=%g", alg, k, tc.w, tc.l, n)
			}
			// Ring AllReduce: every step waits for the slower link; 2 messages a step.
			check("ring", transport.KindAllReduce, 2*(w-1)*max(ai, ae)+4*(w-1)*chunks(n/w)*max(oi, oe)+
				2*(w-1)/w*n/min(bi, be)+(w-1)/w*n/g)
			// Ring Broadcast: a pipelined chain with H-1 of its W-1 hops across hosts; each
			// rank receives and forwards every chunk.
			cn := min(n, c)
			// The first chunk's W-1 hops cost a send and a receive each, later chunks one
			// receive and one forward at the slowest rank.
			check("ring", transport.KindBroadcast, (w-h)*(ai+cn/bi)+(h-1)*(ae+cn/be)+(n-cn)/min(bi, be)+
				2*(w-1+chunks(n)-1)*max(oi, oe))
			// Naive Reduce: the root takes L-1 messages over the host and W-L over the NIC,
			// each phase one hop (the leaves send at once) after a leaf's send.
			check("naive", transport.KindReduce, ai+(l-1)*(chunks(n)*oi+n/bi+n/g)+oi+ae+(w-l)*(chunks(n)*oe+n/be+n/g)+oe)
		}
	}
	// The binomial broadcast from rank 0 over 2 hosts of 2: 0->2 crosses, 0->1 and 2->3
	// stay; the deepest path is 0->2->3 and every link carries the message once.
	m := spanning(2)
	for _, n := range []float64{0, 4096, 1 << 26} {
		got, err := m.Predict("tree", transport.KindBroadcast, int(n), 4)
		require.NoError(t, err)
		// 2 hops, each chunk a send and a receive on each.
		require.InDelta(t, ae+ai+4*chunks(n)*max(oi, oe)+max(n/bi, n/be), got.Seconds(), 2e-9, "n=%g", n)
	}
}

// TestPredictHierPhases: hier is the sum of its phases, each priced as the flat ring or
// tree that PhaseAlgo picks.
func TestPredictHierPhases(t *testing.T) {
	intra, inter := nvlink, ib100
	inter.Gamma = nvlink.Gamma
	for _, tc := range []struct{ w, l int }{{16, 8}, {64, 8}, {1024, 8}, {10, 4}, {6, 2}} {
		m := spanning(tc.l)
		h := (tc.w + tc.l - 1) / tc.l
		for _, n := range []int{0, 8, 64 << 10, 1 << 20, 256 << 20} {
			ph := func(pm algos.CostModel, k transport.Kind, size int) time.Duration {
				alg := algos.PhaseAlgo(pm, k, n, size)
				d, err := pm.Predict(alg, k, n, size)
				require.NoError(t, err)
				return d
			}
			want := ph(intra, transport.KindReduce, tc.l) + ph(inter, transport.KindAllReduce, h) + ph(intra, transport.KindBroadcast, tc.l)
			got, err := m.Predict("hier", transport.KindAllReduce, n, tc.w)
			require.NoError(t, err)
			require.InDelta(t, want.Seconds(), got.Seconds(), 4e-9, "w=%d l=%d n=%d", tc.w, tc.l, n)
		}
	}
}

// TestPredictScale: every algorithm has a finite, size-monotone prediction for every
// collective up to W = 1024 across hosts, and the shapes of the answers are the
// textbook ones: at W = 1024 (8 per host) a small AllReduce takes the ring 2(W-1)
// network-latency steps and hier only 2(H-1), so hier is far faster; the ring's latency
// grows linearly with W, hier's with the number of hosts.
func TestPredictScale(t *testing.T) {
	m := spanning(8)
	for _, name := range []string{"ring", "tree", "naive", "hier"} {
		for _, k := range transport.Kinds {
			for _, w := range []int{2, 8, 9, 16, 100, 1024} {
				prev := time.Duration(-1)
				for _, n := range []int{0, 8, 4 << 10, 1 << 20, 64 << 20, 1 << 30} {
					got, err := m.Predict(name, k, n, w)
					require.NoError(t, err)
					require.GreaterOrEqual(t, got, prev, "%s %s w=%d", name, k, w)
					require.Less(t, got, time.Duration(math.MaxInt64/2), "%s %s w=%d n=%d", name, k, w, n)
					prev = got
				}
			}
		}
	}
	ring, _ := m.Predict("ring", transport.KindAllReduce, 8, 1024)
	hier, _ := m.Predict("hier", transport.KindAllReduce, 8, 1024)
	require.Greater(t, float64(ring)/float64(hier), 5.0, "ring %v vs hier %v", ring, hier)
	h64, _ := m.Predict("hier", transport.KindAllReduce, 8, 64)
	r64, _ := m.Predict("ring", transport.KindAllReduce, 8, 64)
	require.InDelta(t, 1023.0/63, float64(ring)/float64(r64), 0.5)
	require.Less(t, float64(hier)/float64(h64), 1023.0/63/2, "hier grows with hosts, not ranks")
	// Large messages are bandwidth-bound: the ring's 2(W-1)/W n over the NIC against
	// hier's 2(H-1)/H n plus a reduce and a broadcast of n inside the host.
	const n = 1 << 30
	ringBig, _ := m.Predict("ring", transport.KindAllReduce, n, 1024)
	hierBig, _ := m.Predict("hier", transport.KindAllReduce, n, 1024)
	// (Within 15%: the 2048 chunks of each phase add their per-message overhead.)
	want := 2*float64(n)/12.5e9 + 2*float64(n)/150e9
	require.InDelta(t, want, hierBig.Seconds(), 0.15*want)
	require.InDelta(t, 2*float64(n)/12.5e9, ringBig.Seconds(), 0.1*2*float64(n)/12.5e9)
}

// TestPredictBlockHalves: rd's AllGather and ReduceScatter of blocks past the one step,
// over a power-of-two world from 4 ranks, are recursive doubling and halving, counted
// by hand: log2 W hops, a send and a receive of one message per step while the pieces
// fit a chunk, (W-1)/W of the data each way and, for a ReduceScatter, as much reduced;
// at 3, 5 and 6 ranks the ring's W-1 steps. On 2 cores with polling ranks the busiest
// rank's messages stretch by W/Cores, as every algorithm's do, and the whole work again,
// as rd's halving AllReduce's does. Over tcp's built-in model at 4
// ranks the doubling is cheaper than the ring's steps from 128 KiB to 1 MiB, where a
// piece is one message and the step it saves is two.
func TestPredictBlockHalves(t *testing.T) {
	const blk = 64 << 10 // past the one step, and one chunk
	hops := algos.CostModel{Alpha: time.Millisecond, Overhead: time.Nanosecond, Beta: math.Inf(1)}
	msgs := algos.CostModel{Alpha: time.Nanosecond, Overhead: time.Millisecond, Beta: math.Inf(1)}
	wire := algos.CostModel{Alpha: time.Nanosecond, Overhead: time.Nanosecond, Beta: 1e9}
	red := algos.CostModel{Alpha: time.Nanosecond, Overhead: time.Nanosecond, Beta: math.Inf(1), Gamma: 1e9}
	crowded := msgs
	crowded.Cores, crowded.Polls = 2, true
	for _, k := range []transport.Kind{transport.KindAllGather, transport.KindReduceScatter} {
		for _, tc := range []struct {
			w         int
			steps     float64 // dependent steps, each one message out and one in
			crowdedBy float64 // the messages' stretch on 2 polling cores
		}{{3, 2, 1}, {4, 2, 2}, {5, 4, 1}, {6, 5, 1}, {8, 3, 4}, {16, 4, 8}} {
			n := blk * tc.w
			halves := tc.w == 4 || tc.w == 8 || tc.w == 16
			require.Equal(t, halves, algos.PairwiseHalves(blk, tc.w, algos.DefaultChunkBytes, algos.EagerBytes), "w=%d", tc.w)
			predict := func(m algos.CostModel) float64 {
				got, err := m.Predict("rd", k, n, tc.w)
				require.NoError(t, err)
				return got.Seconds()
			}
			require.InDelta(t, tc.steps*1e-3, predict(hops), 1e-5, "%s w=%d hops", k, tc.w)
			require.InDelta(t, 2*tc.steps*1e-3, predict(msgs), 1e-5, "%s w=%d messages", k, tc.w)
			moved := float64(tc.w-1) * blk / 1e9
			require.InDelta(t, moved, predict(wire), 1e-3*moved+1e-5, "%s w=%d wire", k, tc.w)
			reduced := 0.0
			if k == transport.KindReduceScatter {
				reduced = moved
			}
			require.InDelta(t, reduced, predict(red), 1e-3*moved+1e-5, "%s w=%d reduce", k, tc.w)
			if halves { // the busiest rank's messages stretch by W/2 (its core's peers poll), and the work again (both ranks of a pair must run), as rd's halving AllReduce's
				require.InDelta(t, 2*tc.steps*1e-3*tc.crowdedBy*tc.crowdedBy, predict(crowded), 1e-4, "%s w=%d crowded", k, tc.w)
			}
		}
		tcp := algos.TCPModel
		tcp.Cores = 2
		for n := 128 << 10; n <= 1<<20; n *= 2 { // blocks of 32-256 KiB: one message a step, one step fewer
			rd, err := tcp.Predict("rd", k, n, 4)
			require.NoError(t, err)
			ring, err := tcp.Predict("ring", k, n, 4)
			require.NoError(t, err)
			require.Less(t, rd, ring, "%s %d bytes over tcp, 4 ranks", k, n)
		}
	}
}

// TestPredictRDHalving: rd past one eager message at 4 or more ranks is recursive
// halving and doubling, counted by hand: 2 log2 P hops (plus two to fold the W-P extra
// ranks in and out), and at the busiest rank 2(P-1)/P of the buffer each way, (P-1)/P
// of it reduced, plus the extra's whole buffer in, reduced and out again; at 2 and 3
// ranks (P = 2) it stays recursive doubling, one whole buffer each way per step.
func TestPredictRDHalving(t *testing.T) {
	const n = 64 << 20 // past the eager size: every piece pipelined
	hops := algos.CostModel{Alpha: time.Millisecond, Overhead: time.Nanosecond, Beta: math.Inf(1)}
	wire := algos.CostModel{Alpha: time.Nanosecond, Overhead: time.Nanosecond, Beta: 1e9}
	red := algos.CostModel{Alpha: time.Nanosecond, Overhead: time.Nanosecond, Beta: math.Inf(1), Gamma: 1e9}
	for _, tc := range []struct {
		w               int
		hops, wire, red float64 // wire and red in buffers of n
		halves          bool
	}{
		{2, 1, 1, 1, false},
		{3, 3, 2, 2, false}, // doubling: fold in, one exchange, fold out
		{4, 4, 1.5, 0.75, true},
		{5, 6, 3.5, 1.75, true}, // P = 4 and one extra rank
		{8, 6, 1.75, 0.875, true},
	} {
		require.Equal(t, tc.halves, algos.RDHalves(n, tc.w, algos.DefaultChunkBytes, algos.EagerBytes), "w=%d", tc.w)
		got, err := hops.Predict("rd", transport.KindAllReduce, n, tc.w)
		require.NoError(t, err)
		require.InDelta(t, tc.hops*1e-3, got.Seconds(), 1e-4, "w=%d hops", tc.w)
		got, err = wire.Predict("rd", transport.KindAllReduce, n, tc.w)
		require.NoError(t, err)
		require.InDelta(t, tc.wire*n/1e9, got.Seconds(), 1e-3*tc.wire*n/1e9+1e-4, "w=%d wire", tc.w)
		got, err = red.Predict("rd", transport.KindAllReduce, n, tc.w)
		require.NoError(t, err)
		require.InDelta(t, tc.red*n/1e9, got.Seconds(), 1e-3*tc.red*n/1e9+1e-4, "w=%d reduce", tc.w)
	}
}
