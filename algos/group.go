package algos

import (
	"fmt"

	"github.com/goccl/goccl/transport"
)

// Group is a Peers view of a subset of a communicator's ranks, renumbered 0..Size()-1
// in the order the members were given, so any algorithm can run on the subset as if it
// were the whole world. Hierarchical algorithms build one per phase: the ranks of one
// host, then one leader per host. Messages keep the parent's header (so a peer still
// detects a mismatched collective) and travel on the parent's links; two groups that
// share a link must not be used concurrently, because a link is one ordered stream.
//
// Group implements Topology (host identities and transport names in group numbering)
// when the parent does.
type Group struct {
	parent  Peers
	members []int // members[g] is the parent rank of group rank g
	rank    int   // this rank's group rank
}

// NewGroup returns the view of members (parent ranks, distinct, in group order) for the
// calling rank, which must be one of them.
func NewGroup(p Peers, members []int) (*Group, error) {
	self := -1
	seen := make(map[int]bool, len(members))
	for g, r := range members {
		if r < 0 || r >= p.Size() {
			return nil, fmt.Errorf("algos: %w: group member %d outside the world of %d ranks (valid 0..%d)",
				transport.ErrInvalid, r, p.Size(), p.Size()-1)
		}
		if seen[r] {
			return nil, fmt.Errorf("algos: %w: rank %d appears twice in group %v", transport.ErrInvalid, r, members)
		}
		seen[r] = true
		if r == p.Rank() {
			self = g
		}
	}
	if self < 0 {
		return nil, fmt.Errorf("algos: %w: rank %d is not a member of group %v", transport.ErrInvalid, p.Rank(), members)
	}
	return &Group{parent: p, members: append([]int(nil), members...), rank: self}, nil
}

// Rank is the calling rank's position in the group.
func (g *Group) Rank() int { return g.rank }

// Size is the number of members.
func (g *Group) Size() int { return len(g.members) }

// Link returns the parent's link to group rank peer.
func (g *Group) Link(peer int) transport.Conn { return g.parent.Link(g.members[peer]) }

// Header is the parent's header: a group runs inside the parent's operation.
func (g *Group) Header(tag uint32) transport.Header { return g.parent.Header(tag) }

// Member returns the parent rank of group rank r.
func (g *Group) Member(r int) int { return g.members[r] }

// Host is the host identity of group rank r, or "" when the parent has no Topology.
func (g *Group) Host(r int) string {
	if t, ok := g.parent.(Topology); ok {
		return t.Host(g.members[r])
	}
	return ""
}

// Transport names the transport of the link to group rank r, or "" when the parent
// has no Topology.
func (g *Group) Transport(r int) string {
	if t, ok := g.parent.(Topology); ok {
		return t.Transport(g.members[r])
	}
	return ""
}

// HostsOf partitions p's ranks by host identity: one slice of ranks (ascending) per
// host, hosts ordered by their lowest rank, so every rank computes the same partition.
// Without a Topology (or with empty identities) every rank is taken to share one host,
// the safe reading for an algorithm that would otherwise send more over the network.
func HostsOf(p Peers) [][]int {
	w := p.Size()
	t, ok := p.(Topology)
	if !ok {
		all := make([]int, w)
		for r := range all {
			all[r] = r
		}
		return [][]int{all}
	}
	index := map[string]int{}
	var hosts [][]int
	for r := range w {
		h := t.Host(r)
		i, ok := index[h]
		if !ok {
			i = len(hosts)
			index[h] = i
			hosts = append(hosts, nil)
		}
		hosts[i] = append(hosts[i], r)
	}
	return hosts
}

// Layout summarises how a communicator's ranks spread over hosts, the shape the cost
// model needs: Hosts distinct host identities, at most PerHost ranks on any one.
type Layout struct {
	Hosts, PerHost int
}

// LayoutOf returns the layout of hosts, the host identity of every rank (as a
// communicator learns them at Init), and of a Peers view through HostsOf.
func LayoutOf(hosts []string) Layout {
	count := map[string]int{}
	l := Layout{}
	for _, h := range hosts {
		count[h]++
		l.PerHost = max(l.PerHost, count[h])
	}
	l.Hosts = len(count)
	return l
}

// Spans reports whether the ranks live on more than one host and at least one host
// holds more than one rank: the layouts where a hierarchical algorithm can keep traffic
// on the host-local links.
func (l Layout) Spans() bool { return l.Hosts > 1 && l.PerHost > 1 }
