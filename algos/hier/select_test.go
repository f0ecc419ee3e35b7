package hier_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	_ "github.com/goccl/goccl/algos/naive"
	"github.com/goccl/goccl/transport"
)

var (
	nvlink = algos.CostModel{Alpha: 2 * time.Microsecond, Beta: 150e9, Gamma: 400e9}
	ib100  = algos.CostModel{Alpha: 5 * time.Microsecond, Beta: 12.5e9}
)

// TestAutoWithHier: with hier registered, auto still takes the model's best algorithm
// for every kind, size and world, on flat models (where hier is no candidate and must
// never be predicted faster than what auto picks) and on models that span hosts.
func TestAutoWithHier(t *testing.T) {
	models := map[string]algos.CostModel{
		"tcp": algos.TCPModel, "shm": algos.ShmModel,
		"shm+tcp/2":   algos.HostModel(algos.ShmModel, algos.TCPModel, algos.Layout{Hosts: 2, PerHost: 2}),
		"nvlink+ib/8": algos.HostModel(nvlink, ib100, algos.Layout{Hosts: 2, PerHost: 8}),
	}
	for mname, m := range models {
		for _, k := range transport.Kinds {
			for _, w := range []int{2, 3, 4, 8, 64, 1024} {
				for _, n := range []int{8, 4 << 10, 1 << 20, 128 << 20} {
					a, why, err := algos.Resolve("auto", k, n, w, m)
					require.NoError(t, err)
					best := time.Duration(1<<63 - 1)
					for _, name := range algos.Names() {
						cand, _ := algos.Lookup(name)
						if name == "nccl" || !cand.Supports(k) {
							continue
						}
						p, err := m.Predict(name, k, n, w)
						require.NoError(t, err)
						best = min(best, p)
					}
					got, err := m.Predict(a.Name(), k, n, w)
					require.NoError(t, err)
					require.Equal(t, best, got, "%s: %s %d bytes w=%d: chose %s (%s)", mname, k, n, w, a.Name(), why)
				}
			}
		}
	}
}

// TestAutoPicksHier: across hosts with several ranks per host, auto takes hier where
// its fewer network steps matter, and never on one host or with a host per rank.
func TestAutoPicksHier(t *testing.T) {
	ib := algos.HostModel(nvlink, ib100, algos.Layout{Hosts: 128, PerHost: 8})
	for _, n := range []int{8, 64 << 10, 4 << 20} {
		a, why, err := algos.Resolve("auto", transport.KindAllReduce, n, 1024, ib)
		require.NoError(t, err)
		require.Equal(t, "hier", a.Name(), "%d bytes: %s", n, why)
		require.True(t, strings.HasPrefix(why, "hier (auto: model "), why)
	}
	// This machine's links: shm inside a namespace "host", tcp between them.
	local := algos.HostModel(algos.ShmModel, algos.TCPModel, algos.Layout{Hosts: 2, PerHost: 2})
	a, why, err := algos.Resolve("auto", transport.KindAllReduce, 64<<10, 4, local)
	require.NoError(t, err)
	require.Equal(t, "hier", a.Name(), why)
	for name, m := range map[string]algos.CostModel{
		"one host":      algos.HostModel(algos.ShmModel, algos.TCPModel, algos.Layout{Hosts: 1, PerHost: 4}),
		"host per rank": algos.HostModel(algos.ShmModel, algos.TCPModel, algos.Layout{Hosts: 4, PerHost: 1}),
	} {
		for _, n := range []int{8, 64 << 10, 64 << 20} {
			a, why, err := algos.Resolve("auto", transport.KindAllReduce, n, 4, m)
			require.NoError(t, err)
			require.NotEqual(t, "hier", a.Name(), "%s %d bytes: %s", name, n, why)
		}
	}
	// Collectives hier does not implement never land on it.
	a, _, err = algos.Resolve("auto", transport.KindAllGather, 64<<10, 1024, ib)
	require.NoError(t, err)
	require.NotEqual(t, "hier", a.Name())
}

// BenchmarkResolveAcrossHosts is the selector's per-call cost for a 1024-rank
// communicator on 128 hosts (auto prices ring, tree, naive and hier every call).
func BenchmarkResolveAcrossHosts(b *testing.B) {
	m := algos.HostModel(nvlink, ib100, algos.Layout{Hosts: 128, PerHost: 8})
	sp, err := algos.ParseSpec("auto")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := sp.Resolve(transport.KindAllReduce, 1<<20, 1024, m); err != nil {
			b.Fatal(err)
		}
	}
}
