package algos_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// fakePeers is a Peers whose links are only labels, enough to see which parent link a
// group hands out; hosts, when set, makes it a Topology.
type fakePeers struct {
	rank, size int
	hosts      []string
}

type fakeConn struct {
	transport.Conn
	to int
}

func (f fakePeers) Rank() int                    { return f.rank }
func (f fakePeers) Size() int                    { return f.size }
func (f fakePeers) Link(peer int) transport.Conn { return fakeConn{to: peer} }
func (f fakePeers) Header(tag uint32) transport.Header {
	return transport.Header{Seq: 42, Tag: tag}
}

type fakeTopo struct{ fakePeers }

func (f fakeTopo) Host(r int) string      { return f.hosts[r] }
func (f fakeTopo) Transport(r int) string { return "t" + f.hosts[r] }

func TestGroupView(t *testing.T) {
	p := fakeTopo{fakePeers{rank: 5, size: 8, hosts: []string{"a", "a", "b", "b", "c", "c", "d", "d"}}}
	g, err := algos.NewGroup(p, []int{6, 5, 1})
	require.NoError(t, err)
	require.Equal(t, 1, g.Rank(), "rank 5 is the group's second member")
	require.Equal(t, 3, g.Size())
	for i, want := range []int{6, 5, 1} {
		require.Equal(t, want, g.Member(i))
		require.Equal(t, want, g.Link(i).(fakeConn).to, "group rank %d's link is the parent's link to %d", i, want)
	}
	require.Equal(t, transport.Header{Seq: 42, Tag: 7}, g.Header(7), "a group runs inside the parent's operation")
	require.Equal(t, "d", g.Host(0))
	require.Equal(t, "ta", g.Transport(2))

	// A group of a group renumbers again.
	gg, err := algos.NewGroup(g, []int{2, 1})
	require.NoError(t, err)
	require.Equal(t, 1, gg.Rank())
	require.Equal(t, 1, gg.Link(0).(fakeConn).to)
	require.Equal(t, "a", gg.Host(0))

	plain, err := algos.NewGroup(fakePeers{rank: 0, size: 2}, []int{0, 1})
	require.NoError(t, err)
	require.Empty(t, plain.Host(1), "no Topology, no host names")
}

func TestGroupErrors(t *testing.T) {
	p := fakePeers{rank: 2, size: 4}
	for _, tc := range []struct {
		members []int
		want    string
	}{
		{[]int{2, 4}, "group member 4 outside the world of 4 ranks (valid 0..3)"},
		{[]int{-1, 2}, "group member -1 outside"},
		{[]int{2, 1, 2}, "rank 2 appears twice in group [2 1 2]"},
		{[]int{0, 1}, "rank 2 is not a member of group [0 1]"},
		{nil, "rank 2 is not a member of group []"},
	} {
		_, err := algos.NewGroup(p, tc.members)
		require.ErrorIs(t, err, transport.ErrInvalid, "%v", tc.members)
		require.ErrorContains(t, err, tc.want)
	}
}

func TestHostsOf(t *testing.T) {
	p := fakeTopo{fakePeers{rank: 0, size: 6, hosts: []string{"y", "x", "y", "z", "x", "y"}}}
	require.Equal(t, [][]int{{0, 2, 5}, {1, 4}, {3}}, algos.HostsOf(p), "hosts in order of their lowest rank")
	require.Equal(t, [][]int{{0, 1, 2}}, algos.HostsOf(fakePeers{size: 3}), "no Topology: one host")
	require.Equal(t, algos.Layout{Hosts: 3, PerHost: 3}, algos.LayoutOf(p.hosts))
	require.Equal(t, algos.Layout{}, algos.LayoutOf(nil))
}
