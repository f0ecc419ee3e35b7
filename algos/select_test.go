package algos_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	_ "github.com/goccl/goccl/algos/naive"
	"github.com/goccl/goccl/algos/ring"
	"github.com/goccl/goccl/algos/tree"
	"github.com/goccl/goccl/transport"
)

func TestRegistry(t *testing.T) {
	require.Equal(t, []string{"naive", "ring", "tree"}, algos.Names())
	a, err := algos.Lookup("ring")
	require.NoError(t, err)
	require.Equal(t, "ring", a.Name())

	_, err = algos.Lookup("foo")
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, `unknown algorithm "foo" (forgotten import?); valid: naive, ring, tree`)
	_, err = algos.Lookup("auto")
	require.ErrorContains(t, err, "use Resolve")

	require.PanicsWithValue(t, "algos: Register called twice for ring", func() { algos.Register(ring.Algorithm{}) })
	require.Panics(t, func() { algos.Register(fakeAlg("auto")) })
	require.Panics(t, func() { algos.Register(fakeAlg("")) })
}

type fakeAlg string

func (f fakeAlg) Name() string                                      { return string(f) }
func (fakeAlg) Supports(transport.Kind) bool                        { return false }
func (fakeAlg) Run(context.Context, algos.Peers, *algos.Args) error { return nil }

func TestParseSpec(t *testing.T) {
	tests := []struct{ in, canon string }{
		{"", "auto"},
		{"auto", "auto"},
		{" Ring ", "ring"},
		{"allreduce:ring,broadcast:tree", "allreduce:ring;broadcast:tree"},
		{"all_reduce:tree<64K,ring", "allreduce:tree<64K,ring"},
		{"tree<64KiB,ring;allgather:naive<4096,ring", "tree<64K,ring;allgather:naive<4K,ring"},
		{"allreduce:tree<65536B,ring<64MB,auto", "allreduce:tree<64K,ring<64M,auto"},
		{"ring;allreduce:tree<1G", "ring;allreduce:tree<1G"},
		{"tree<100", "tree<100"},
	}
	for _, tt := range tests {
		sp, err := algos.ParseSpec(tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.canon, sp.String(), tt.in)
		again, err := algos.ParseSpec(sp.String())
		require.NoError(t, err)
		require.Equal(t, sp.String(), again.String())
	}
}

func TestParseSpecErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"foo", `unknown algorithm "foo"; valid: auto, naive, ring, tree`},
		{"allreduce:foo", `unknown algorithm "foo"; valid: auto, naive, ring, tree`},
		{"allreduc:ring", `unknown collective "allreduc" (valid: allreduce, reduce`},
		{"ring,,tree", "has an empty entry"},
		{"ring,tree", `"tree" follows "ring", which already covers every size`},
		{"tree<64K,ring<32K", `"ring<32K" must have a larger bound than "tree<64K"`},
		{"tree<0", "a size bound must be above 0"},
		{"tree<lots", `bad size: "lots" is not a byte count (want a whole number of bytes such as 4096, 512K`},
		{"tree<-4K", `bad size: "-4K" is not a byte count`},
		{"allreduce:ring,allreduce:tree", "gives allreduce twice"},
	}
	for _, tt := range tests {
		_, err := algos.ParseSpec(tt.in)
		require.ErrorIs(t, err, transport.ErrInvalid, tt.in)
		require.ErrorContains(t, err, tt.want, tt.in)
		require.ErrorContains(t, err, fmt.Sprintf("%q", tt.in), "the error quotes the whole spec")
	}
}

func TestResolve(t *testing.T) {
	m := algos.TCPModel
	tests := []struct {
		spec   string
		kind   transport.Kind
		bytes  int
		world  int
		alg    string
		reason string
	}{
		{"ring", transport.KindAllReduce, 1 << 20, 4, "ring", "ring (config)"},
		{"ring", transport.KindGather, 1 << 20, 4, "naive", "naive (fallback: ring does not implement gather)"},
		{"tree", transport.KindAllGather, 1 << 20, 4, "ring", "ring (fallback: tree does not implement allgather)"},
		{"tree", transport.KindAllToAll, 1 << 20, 4, "naive", "naive (fallback: tree does not implement alltoall)"},
		{"tree", transport.KindBarrier, 0, 4, "tree", "tree (config)"},
		{"allreduce:tree<64K,ring", transport.KindAllReduce, 1000, 8, "tree", "tree (config: allreduce < 64K)"},
		{"allreduce:tree<64K,ring", transport.KindAllReduce, 64 << 10, 8, "ring", "ring (config: allreduce)"},
		{"naive<4K;allreduce:tree<1K", transport.KindAllReduce, 2000, 8, "naive", "naive (config: < 4K)"},
		{"allreduce:tree<1K", transport.KindBroadcast, 10, 1, "ring", "ring (auto: world of 1 rank, a local copy)"},
		{"auto", transport.KindGather, 100, 4, "naive", "naive (auto: only naive implements gather)"},
	}
	for _, tt := range tests {
		a, why, err := algos.Resolve(tt.spec, tt.kind, tt.bytes, tt.world, m)
		require.NoError(t, err, tt.spec)
		require.Equal(t, tt.alg, a.Name(), "%s %s %d", tt.spec, tt.kind, tt.bytes)
		require.Equal(t, tt.reason, why, "%s %s %d", tt.spec, tt.kind, tt.bytes)
	}
	_, _, err := algos.Resolve("bogus", transport.KindAllReduce, 8, 2, m)
	require.ErrorIs(t, err, transport.ErrInvalid)
	_, _, err = algos.Resolve("ring", transport.KindControl, 8, 2, m)
	require.ErrorIs(t, err, transport.ErrInvalid)
}

// TestAutoTakesTheModelsBest checks auto against Predict itself: for each kind, size
// and world, the chosen algorithm is one whose predicted time is the minimum over the
// algorithms that implement the kind, and the reason quotes both times.
func TestAutoTakesTheModelsBest(t *testing.T) {
	for _, m := range []algos.CostModel{algos.TCPModel, algos.ShmModel} {
		for _, k := range transport.Kinds {
			for _, w := range []int{2, 3, 8, 64, 1024} {
				for _, n := range []int{8, 4 << 10, 1 << 20, 128 << 20} {
					a, why, err := algos.Resolve("auto", k, n, w, m)
					require.NoError(t, err)
					best := time.Duration(1<<63 - 1)
					impl := 0
					for _, name := range algos.Names() {
						cand, _ := algos.Lookup(name)
						if !cand.Supports(k) {
							continue
						}
						impl++
						p, err := m.Predict(name, k, n, w)
						require.NoError(t, err)
						best = min(best, p)
					}
					got, err := m.Predict(a.Name(), k, n, w)
					require.NoError(t, err)
					require.Equal(t, best, got, "%s %d bytes w=%d: chose %s (%s)", k, n, w, a.Name(), why)
					if impl > 1 {
						require.True(t, strings.HasPrefix(why, a.Name()+" (auto: model "+algos.FormatDuration(got)+" vs "), why)
					}
				}
			}
		}
	}
}

// TestAutoShape checks the model gives the textbook answer: trees for small messages on
// many ranks (log W steps against W), ring for large ones (bandwidth-optimal).
func TestAutoShape(t *testing.T) {
	a, _, err := algos.Resolve("auto", transport.KindAllReduce, 8, 64, algos.TCPModel)
	require.NoError(t, err)
	require.Equal(t, tree.Name, a.Name())
	a, _, err = algos.Resolve("auto", transport.KindAllReduce, 256<<20, 8, algos.TCPModel)
	require.NoError(t, err)
	require.Equal(t, ring.Name, a.Name())
	a, _, err = algos.Resolve("auto", transport.KindBroadcast, 128<<20, 16, algos.TCPModel)
	require.NoError(t, err)
	require.Equal(t, ring.Name, a.Name(), "a pipelined chain beats the binomial tree's log W copies at the root")
}

// TestNativeKindsMatchSupports keeps the cost model's view of who implements what in
// step with the algorithms' Supports.
func TestNativeKindsMatchSupports(t *testing.T) {
	m := algos.CostModel{Alpha: time.Microsecond, Beta: 1e9}
	for _, name := range algos.Names() {
		a, _ := algos.Lookup(name)
		for _, k := range transport.Kinds {
			own, err := m.Predict(name, k, 1<<20, 4)
			require.NoError(t, err)
			fb, _, err := algos.Resolve(name, k, 1<<20, 4, m)
			require.NoError(t, err)
			viaFallback, err := m.Predict(fb.Name(), k, 1<<20, 4)
			require.NoError(t, err)
			require.Equal(t, viaFallback, own, "%s %s: Predict must follow the same fallback as Resolve", name, k)
			if a.Supports(k) {
				require.Equal(t, name, fb.Name())
			}
		}
	}
}

func TestFormat(t *testing.T) {
	require.Equal(t, "3.4us", algos.FormatDuration(3400*time.Nanosecond))
	require.Equal(t, "40us", algos.FormatDuration(40*time.Microsecond))
	require.Equal(t, "1.25ms", algos.FormatDuration(1250*time.Microsecond))
	require.Equal(t, "2.00s", algos.FormatDuration(2*time.Second))
	for _, s := range []string{"512", "8B", "64K", "64KiB", "64kb", "4M", "1G"} {
		n, err := algos.ParseSize(s)
		require.NoError(t, err, s)
		back, err := algos.ParseSize(algos.FormatSize(n))
		require.NoError(t, err)
		require.Equal(t, n, back)
	}
	n, _ := algos.ParseSize("64KiB")
	require.Equal(t, 65536, n)
}
