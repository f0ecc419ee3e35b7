package algostest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// RunFunc is how a rank runs one collective: an Algorithm's Run, or a selector in front
// of several.
type RunFunc func(ctx context.Context, p algos.Peers, a *algos.Args) error

// Options trims or widens Matrix.
type Options struct {
	Kinds  []transport.Kind  // default: every kind the algorithm Supports
	Worlds []int             // default 1, 2, 3, 4, 5, 8
	Counts []int             // default 0, 1, 7, 13 and 1000 (13: divisible by no world size)
	DTypes []transport.DType // default transport.DTypes
	// Large runs a few dtype/kind pairs at LargeCount elements (default 4M+3), on 4 ranks.
	Large      bool
	LargeCount int
	// Timeout bounds each collective (default 20 s): a hang fails the test, not CI.
	Timeout time.Duration
}

func (o *Options) defaults(supports func(transport.Kind) bool) {
	if o.Kinds == nil {
		for _, k := range transport.Kinds {
			if supports(k) {
				o.Kinds = append(o.Kinds, k)
			}
		}
	}
	if o.Worlds == nil {
		o.Worlds = []int{1, 2, 3, 4, 5, 8}
	}
	if o.Counts == nil {
		o.Counts = []int{0, 1, 7, 13, 1000}
	}
	if o.DTypes == nil {
		o.DTypes = transport.DTypes
		if raceEnabled {
			// One dtype per kernel family: bytes, 32-bit ints, both 16-bit floats, doubles.
			o.DTypes = []transport.DType{transport.Int8, transport.Int32, transport.Float16,
				transport.BFloat16, transport.Float64}
		}
	}
	if o.LargeCount == 0 {
		o.LargeCount = 4<<20 + 3
		if raceEnabled {
			o.LargeCount = 256<<10 + 3 // the race detector makes every kernel loop ~20x slower
		}
	}
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Second
	}
}

// Matrix checks alg against the reference over the standard matrix.
func Matrix(t *testing.T, alg algos.Algorithm, o Options) {
	MatrixFunc(t, alg.Name(), alg.Run, alg.Supports, o)
}

// MatrixFunc is Matrix for any RunFunc: every kind in o.Kinds x every dtype x every op
// (reducing kinds) x world sizes x counts, in-place and out-of-place, with the default
// chunk size and with a tiny one (24 bytes) that forces many pipelined chunks, roots
// varied across the calls; then every root of every rooted kind; then Real-valued
// float sums and averages against the error bound; then the large cases.
func MatrixFunc(t *testing.T, name string, run RunFunc, supports func(transport.Kind) bool, o Options) {
	o.defaults(supports)
	for _, w := range o.Worlds {
		t.Run(fmt.Sprintf("%s/world%d", name, w), func(t *testing.T) {
			m, err := NewMesh(context.Background(), w)
			require.NoError(t, err)
			defer m.Close()
			check := func(c Case) {
				ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
				defer cancel()
				if err := c.Check(ctx, m, run); err != nil {
					t.Fatalf("%s: world %d: %v", name, w, err)
				}
			}
			seed := uint64(0)
			for _, k := range o.Kinds {
				ops := []transport.Op{transport.Sum}
				if reducing(k) {
					ops = transport.Ops
				}
				dts := o.DTypes
				counts := o.Counts
				if k == transport.KindBarrier {
					dts, ops, counts = dts[:1], ops[:1], []int{0}
				}
				for _, dt := range dts {
					for _, op := range ops {
						for _, n := range counts {
							for _, inPlace := range []bool{false, true} {
								// A tiny chunk makes short calls many-chunk pipelines; long calls
								// get a moderate one, or W=8 rings send thousands of messages.
								chunks := []int{0, 24}
								if n > 100 {
									chunks = []int{0, 1000}
								}
								for _, chunk := range chunks {
									seed++
									root := int(seed) % w
									if k == transport.KindSendRecv {
										root = 1 + int(seed)%max(w, 1)
									}
									check(Case{Kind: k, DType: dt, Op: op, Count: n, Root: root, InPlace: inPlace,
										ChunkBytes: chunk, Seed: seed})
								}
							}
						}
					}
				}
				if rooted(k) || k == transport.KindSendRecv {
					for root := range w {
						for _, dt := range []transport.DType{transport.Float32, transport.Int8} {
							for _, inPlace := range []bool{false, true} {
								seed++
								check(Case{Kind: k, DType: dt, Op: transport.Max, Count: 13, Root: root,
									InPlace: inPlace, ChunkBytes: 8, Seed: seed})
							}
						}
					}
				}
				if reducing(k) {
					for _, dt := range []transport.DType{transport.Float16, transport.BFloat16, transport.Float32, transport.Float64} {
						for _, op := range []transport.Op{transport.Sum, transport.Avg} {
							seed++
							check(Case{Kind: k, DType: dt, Op: op, Count: 1000, Root: w - 1, Values: Real,
								ChunkBytes: 200, Seed: seed})
						}
					}
				}
			}
		})
	}
	if o.Large && !testing.Short() {
		t.Run(name+"/large", func(t *testing.T) {
			largeCases(t, run, o)
		})
	}
}

// largeCases runs millions of elements through a few representative calls: the
// float32 sum every benchmark uses, a 16-bit type, and a byte type.
func largeCases(t *testing.T, run RunFunc, o Options) {
	cases := []struct {
		w int
		c Case
	}{
		{4, Case{Kind: transport.KindAllReduce, DType: transport.Float32, Op: transport.Sum}},
		{3, Case{Kind: transport.KindAllReduce, DType: transport.BFloat16, Op: transport.Sum, InPlace: true}},
		{4, Case{Kind: transport.KindReduceScatter, DType: transport.Int8, Op: transport.Sum}},
		{4, Case{Kind: transport.KindAllGather, DType: transport.Float64, InPlace: true}},
		{3, Case{Kind: transport.KindBroadcast, DType: transport.Float32, Root: 1}},
		{3, Case{Kind: transport.KindReduce, DType: transport.Int32, Op: transport.Max, Root: 2}},
	}
	for i, tc := range cases {
		if !slices.Contains(o.Kinds, tc.c.Kind) {
			continue
		}
		c := tc.c
		c.Count = o.LargeCount
		if c.Kind == transport.KindReduceScatter || c.Kind == transport.KindAllGather {
			c.Count = o.LargeCount / tc.w // keep the whole buffer at LargeCount elements
		}
		c.Seed = uint64(1000 + i)
		m, err := NewMesh(context.Background(), tc.w)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 4*o.Timeout)
		err = c.Check(ctx, m, run)
		cancel()
		m.Close()
		require.NoError(t, err, "world %d", tc.w)
	}
}

// CheckFailures checks the error paths every algorithm must get right, for each kind
// run implements: when rank 1's count differs from the others', some rank reports a
// mismatch and no rank waits for the deadline; when a rank dies mid-call (returns and
// closes its links, as an aborted communicator does), no rank waits for the deadline,
// and for kinds where every rank's result depends on every other rank (AllReduce,
// AllGather, ReduceScatter, AllToAll, Barrier) every surviving rank fails. (In one-way
// kinds a rank that only sends may finish before it can notice.) Worlds of 2, 3, 4 and 5
// ranks; the dying rank's peers call with 8192 elements in 1 KiB chunks, and at 4 ranks
// the mismatched counts are 8192 and 8193, so that both failures reach the paths past
// one message and, at 4 ranks, the power-of-two ones (rd's halving and doubling).
func CheckFailures(t *testing.T, name string, run RunFunc, supports func(transport.Kind) bool) {
	for _, k := range transport.Kinds {
		if !supports(k) {
			continue
		}
		t.Run(name+"/"+k.String(), func(t *testing.T) {
			for _, w := range []int{2, 3, 4, 5} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				noDeadline := func(errs []error, what string) {
					for r, err := range errs {
						require.False(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, transport.ErrTimeout),
							"%s: world %d rank %d waited for the deadline: %v", what, w, r, err)
					}
				}
				args := make([]*algos.Args, w)
				if k != transport.KindBarrier {
					m, err := NewMesh(ctx, w)
					require.NoError(t, err)
					for r := range w {
						count := 64
						if w == 4 { // past one message, on the power-of-two paths
							count = 1 << 13
						}
						if r == 1 {
							count++
						}
						c := Case{Kind: k, DType: transport.Float32, Op: transport.Sum, Count: count, Root: 1}
						args[r] = c.build(rngFor(r), r, w, count*4, nil).args
					}
					errs := m.Run(ctx, args, run)
					m.Close()
					noDeadline(errs, "count mismatch")
					mismatch := false
					for _, err := range errs {
						mismatch = mismatch || errors.Is(err, transport.ErrMismatch)
					}
					require.True(t, mismatch, "world %d: some rank must report the count mismatch: %v", w, errs)
				}

				m, err := NewMesh(ctx, w)
				require.NoError(t, err)
				for r := range w {
					// The dying rank must be one others receive from: the root of the
					// one-to-all kinds, a contributor to the all-to-one kinds.
					root := 0
					switch k {
					case transport.KindSendRecv:
						root = 1 // the shift: rank r sends to r+1
					case transport.KindBroadcast, transport.KindScatter:
						root = w - 1
					}
					c := Case{Kind: k, DType: transport.Float32, Op: transport.Sum, Count: 1 << 13, Root: root, ChunkBytes: 1 << 10}
					args[r] = c.build(rngFor(r), r, w, 4<<13, nil).args
				}
				dead := errors.New("rank died")
				errs := m.Run(ctx, args, func(ctx context.Context, p algos.Peers, a *algos.Args) error {
					if p.Rank() == w-1 {
						return dead
					}
					return run(ctx, p, a)
				})
				m.Close()
				noDeadline(errs, "dead rank")
				allDepend := k == transport.KindAllReduce || k == transport.KindAllGather ||
					k == transport.KindReduceScatter || k == transport.KindAllToAll || k == transport.KindBarrier
				failed := 0
				for r, err := range errs[:w-1] {
					if err != nil {
						failed++
						require.True(t, errors.Is(err, transport.ErrPeer) || errors.Is(err, transport.ErrClosed) ||
							errors.Is(err, context.Canceled), "world %d rank %d: want a peer error, got %v", w, r, err)
					} else if allDepend {
						t.Fatalf("world %d rank %d finished %s although rank %d died", w, r, k, w-1)
					}
				}
				require.Positive(t, failed, "world %d: nobody noticed rank %d die", w, w-1)
			}
		})
	}
}
