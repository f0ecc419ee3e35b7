package hier_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/hier"
	"github.com/goccl/goccl/transport"
)

// hosted gives an algostest rank a Topology: host(r) names rank r's host.
type hosted struct {
	algos.Peers
	host func(r int) string
}

func (h hosted) Host(r int) string { return h.host(r) }

func (h hosted) Transport(r int) string {
	switch {
	case r == h.Rank():
		return "self"
	case h.host(r) == h.host(h.Rank()):
		return "shm"
	}
	return "tcp"
}

// layouts place W ranks on hosts in the shapes a hierarchical algorithm must handle.
var layouts = []struct {
	name string
	host func(r, w int) int
}{
	{"two-per-host", func(r, w int) int { return r / 2 }},
	{"three-per-host", func(r, w int) int { return r / 3 }},         // W=4,5: a short last host
	{"round-robin", func(r, w int) int { return r % 2 }},            // hosts not contiguous in rank order
	{"uneven", func(r, w int) int { return min(r, 1) }},             // rank 0 alone, the rest together
	{"one-host", func(r, w int) int { return 0 }},                   // nothing crosses the network
	{"own-host", func(r, w int) int { return r }},                   // one rank per host: only the leaders' phase
	{"reversed", func(r, w int) int { return (w - 1 - r) / 2 }},     // host order is not rank order
	{"single-first", func(r, w int) int { return max(0, (r+1)/2) }}, // {0} {1,2} {3,4} ...
}

func withHosts(alg algos.Algorithm, host func(r, w int) int) algostest.RunFunc {
	return func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		w := p.Size()
		return alg.Run(ctx, hosted{p, func(r int) string { return fmt.Sprintf("host%d", host(r, w)) }}, a)
	}
}

// TestMatrix runs the full matrix (every dtype, op, count, world 1..8, in-place, tiny
// chunks) on two ranks per host, and a reduced matrix on every other layout.
func TestMatrix(t *testing.T) {
	a := hier.Algorithm{}
	algostest.MatrixFunc(t, "hier/two-per-host", withHosts(a, layouts[0].host), a.Supports, algostest.Options{Large: true})
	for _, l := range layouts[1:] {
		algostest.MatrixFunc(t, "hier/"+l.name, withHosts(a, l.host), a.Supports, algostest.Options{
			Worlds: []int{2, 3, 4, 5, 8},
			Counts: []int{0, 1, 13, 1000},
			DTypes: []transport.DType{transport.Int32, transport.BFloat16, transport.Float64},
		})
	}
}

// TestWithoutTopology: a Peers view that says nothing about hosts still gets the right
// answer (every rank is taken to share one host).
func TestWithoutTopology(t *testing.T) {
	a := hier.Algorithm{}
	algostest.MatrixFunc(t, "hier/no-topology", a.Run, a.Supports, algostest.Options{
		Worlds: []int{1, 3, 4},
		Counts: []int{0, 7, 1000},
		DTypes: []transport.DType{transport.Float32, transport.Uint8},
	})
}

// TestPhaseChoices forces each phase onto the tree and onto the ring through the models,
// so both inner algorithms run inside and across hosts (the default models pick tree
// only for small calls).
func TestPhaseChoices(t *testing.T) {
	latencyBound := algos.CostModel{Alpha: 1e6, Beta: 1e15} // 1 ms steps: the tree's log W wins
	bandwidthBound := algos.CostModel{Alpha: 1, Beta: 1e3}  // 1 kB/s: the ring's bytes win
	for _, m := range []struct {
		name         string
		intra, inter algos.CostModel
	}{
		{"tree-tree", latencyBound, latencyBound},
		{"ring-ring", bandwidthBound, bandwidthBound},
		{"tree-ring", latencyBound, bandwidthBound},
		{"ring-tree", bandwidthBound, latencyBound},
	} {
		a := hier.Algorithm{Intra: m.intra, Inter: m.inter}
		for _, l := range []int{0, 1, 3} {
			algostest.MatrixFunc(t, "hier/"+m.name+"/"+layouts[l].name, withHosts(a, layouts[l].host), a.Supports, algostest.Options{
				Worlds: []int{4, 5, 8},
				Counts: []int{0, 13, 1000},
				DTypes: []transport.DType{transport.Float32, transport.Int8},
			})
		}
	}
}

func TestFailures(t *testing.T) {
	a := hier.Algorithm{}
	for _, l := range []int{0, 3} {
		algostest.CheckFailures(t, "hier/"+layouts[l].name, withHosts(a, layouts[l].host), a.Supports)
	}
}

// TestUnsupported: collectives hier does not implement say so, and the selector sends
// them down the fallback chain.
func TestUnsupported(t *testing.T) {
	a := hier.Algorithm{}
	for _, k := range transport.Kinds {
		want := k == transport.KindAllReduce || k == transport.KindReduce || k == transport.KindBroadcast
		require.Equal(t, want, a.Supports(k), k)
	}
	alg, why, err := algos.Resolve("hier", transport.KindAllGather, 1<<20, 4, algos.TCPModel)
	require.NoError(t, err)
	require.Equal(t, "ring", alg.Name())
	require.Equal(t, "ring (fallback: hier does not implement allgather)", why)
	m, err := algostest.NewMesh(context.Background(), 2)
	require.NoError(t, err)
	defer m.Close()
	args := []*algos.Args{
		{Kind: transport.KindGather, DType: transport.Float32, Count: 1, Send: make([]byte, 4), Recv: make([]byte, 8)},
		{Kind: transport.KindGather, DType: transport.Float32, Count: 1, Send: make([]byte, 4)},
	}
	for _, err := range m.RunAlgorithm(context.Background(), a, args) {
		require.ErrorIs(t, err, transport.ErrNotSupported)
		require.ErrorContains(t, err, "hier: ")
	}
}

// TestEager: no send of more than the eager size waits for its receiver before this
// rank receives (algostest.CheckEager), with ranks on one host and on several.
func TestEager(t *testing.T) {
	a := hier.Algorithm{}
	for _, l := range []int{0, 3} {
		algostest.CheckEager(t, "hier/"+layouts[l].name, withHosts(a, layouts[l].host), a.Supports)
	}
}
