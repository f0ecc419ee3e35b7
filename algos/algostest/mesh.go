package algostest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/inmem"
)

var meshID atomic.Int64

// Mesh is world goroutine ranks linked pairwise over the inmem transport.
type Mesh struct {
	World int
	links [][]transport.Conn // links[r][p]: rank r's end of the link to p (nil for r == p)
	seq   uint64
}

// NewMesh opens an inmem endpoint per rank and connects every pair.
func NewMesh(ctx context.Context, world int) (*Mesh, error) {
	if world < 1 {
		return nil, fmt.Errorf("algostest: %w: world of %d ranks", transport.ErrInvalid, world)
	}
	id := fmt.Sprintf("algostest-%d", meshID.Add(1))
	m := &Mesh{World: world, links: make([][]transport.Conn, world)}
	eps := make([]transport.Endpoint, world)
	for r := range world {
		ep, err := inmem.Transport{}.Open(ctx, transport.Local{CommID: id, Rank: r, World: world})
		if err != nil {
			return nil, err
		}
		eps[r] = ep
		m.links[r] = make([]transport.Conn, world)
	}
	for r := range world {
		for p := range world {
			if p == r {
				continue
			}
			c, err := eps[r].Connect(ctx, transport.PeerInfo{Rank: p, Handle: eps[p].Handle()})
			if err != nil {
				m.Close()
				return nil, err
			}
			m.links[r][p] = c
		}
	}
	return m, nil
}

// MeshOf is a mesh over links that are already connected (links[r][p]: rank r's end of
// the link to p, nil for r == p), of any transport, for running the algorithms over it.
func MeshOf(links [][]transport.Conn) *Mesh {
	return &Mesh{World: len(links), links: links}
}

// Wrap replaces every link with what f makes of it (f(rank, peer, link)), to slow or
// break links in a test.
func (m *Mesh) Wrap(f func(rank, peer int, c transport.Conn) transport.Conn) {
	for r, row := range m.links {
		for p, c := range row {
			if c != nil {
				row[p] = f(r, p, c)
			}
		}
	}
}

// Close closes every link.
func (m *Mesh) Close() {
	for r := range m.links {
		m.closeRank(r)
	}
}

func (m *Mesh) closeRank(r int) {
	for _, c := range m.links[r] {
		if c != nil {
			c.Close()
		}
	}
}

// Peers is the view of rank r for the next operation: what an algorithm sees.
type Peers struct {
	rank  int
	links []transport.Conn
	hdr   transport.Header
}

// Rank is this rank.
func (p *Peers) Rank() int { return p.rank }

// Size is the world size.
func (p *Peers) Size() int { return len(p.links) }

// Link is the connection to peer.
func (p *Peers) Link(peer int) transport.Conn { return p.links[peer] }

// Header stamps this operation's sequence number and fingerprint, with tag.
func (p *Peers) Header(tag uint32) transport.Header {
	h := p.hdr
	h.Tag = tag
	return h
}

// Fingerprint is what a communicator would put in the headers of a's call.
func Fingerprint(a *algos.Args) transport.Fingerprint {
	fp := transport.Fingerprint{Kind: a.Kind, DType: a.DType, Count: uint64(a.Count), Root: -1}
	switch a.Kind {
	case transport.KindAllReduce, transport.KindReduce, transport.KindReduceScatter:
		fp.Op = a.Op
	}
	switch a.Kind {
	case transport.KindReduce, transport.KindBroadcast, transport.KindGather, transport.KindScatter:
		fp.Root = int32(a.Root)
	case transport.KindBarrier:
		fp.DType, fp.Count = 0, 0
	}
	return fp
}

// Run runs one collective: rank r calls run(ctx, peers, args[r]) with the algorithm of
// its choice. A rank that fails has its links closed, as a communicator's abort would,
// so the others fail promptly; the per-rank errors are returned.
func (m *Mesh) Run(ctx context.Context, args []*algos.Args, run func(ctx context.Context, p algos.Peers, a *algos.Args) error) []error {
	m.seq++
	errs := make([]error, m.World)
	var wg sync.WaitGroup
	for r := range m.World {
		p := &Peers{rank: r, links: m.links[r], hdr: transport.Header{Seq: m.seq, Fp: Fingerprint(args[r])}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx, p, args[r]); err != nil {
				errs[r] = err
				m.closeRank(r)
			}
		}()
	}
	wg.Wait()
	return errs
}

// RunAlgorithm runs alg on every rank.
func (m *Mesh) RunAlgorithm(ctx context.Context, alg algos.Algorithm, args []*algos.Args) []error {
	return m.Run(ctx, args, alg.Run)
}

// FirstError returns the first non-nil error with its rank, or nil.
func FirstError(errs []error) error {
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}
