package direct_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/direct"
	"github.com/goccl/goccl/algos/naive"
	"github.com/goccl/goccl/algos/ring"
	"github.com/goccl/goccl/transport"
)

// shared stands in for the communicator's AllocShared memory where the ranks are
// goroutines of one process (as algostest's meshes are): each rank registers its call's
// Send and Recv as its allocations 0 and 1 before it runs, and peers view them directly.
// Only memory that each rank registered is visible, through the same Locate/PeerView
// contract the communicator implements over shm windows (tested there, between
// processes).
type shared struct {
	mu     sync.Mutex
	allocs map[int][2][]byte
	skip   int // a rank whose buffers are not shared (-1: none)
}

type sharedPeers struct {
	algos.Peers
	s *shared
}

func (p sharedPeers) SharedAllocs() int { return 2 }

func (p sharedPeers) Locate(b []byte) (int, int, bool) {
	if len(b) == 0 || p.Rank() == p.s.skip {
		return 0, 0, false
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for i, m := range p.s.allocs[p.Rank()] {
		if len(m) == 0 {
			continue
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		if lo >= base && lo-base+uintptr(len(b)) <= uintptr(len(m)) {
			return i, int(lo - base), true
		}
	}
	return 0, 0, false
}

func (p sharedPeers) PeerView(r, alloc, off, n int) ([]byte, error) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	m := p.s.allocs[r][alloc]
	if off < 0 || off+n > len(m) {
		return nil, fmt.Errorf("rank %d alloc %d: [%d, %d) outside %d bytes", r, alloc, off, off+n, len(m))
	}
	return m[off : off+n], nil
}

// runner returns a RunFunc that runs direct on shared buffers and counts how often it
// fell back; fallback runs the ring (naive where the ring does not implement the kind),
// as the communicator does.
func runner(s *shared, fellBack *int64, mu *sync.Mutex) algostest.RunFunc {
	return func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		s.mu.Lock()
		s.allocs[p.Rank()] = [2][]byte{a.Send, a.Recv}
		s.mu.Unlock()
		err := direct.Algorithm{}.Run(ctx, sharedPeers{p, s}, a)
		if errors.Is(err, direct.ErrNotShared) {
			mu.Lock()
			*fellBack++
			mu.Unlock()
			if !(ring.Algorithm{}).Supports(a.Kind) {
				return naive.Algorithm{}.Run(ctx, p, a)
			}
			return ring.Algorithm{}.Run(ctx, p, a)
		}
		return err
	}
}

// TestMatrix runs the standard matrix (every dtype and op, worlds 1-8, counts 0, 1, 7,
// 13, 1000, in place and not, and the large cases) against the float64 reference. Only
// count 0 may fall back (an empty buffer is in no allocation), and an in-place AllToAll
// (which direct refuses, see usable).
func TestMatrix(t *testing.T) {
	s := &shared{allocs: map[int][2][]byte{}, skip: -1}
	var fell int64
	var mu sync.Mutex
	run := runner(s, &fell, &mu)
	strict := func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		before := func() int64 { mu.Lock(); defer mu.Unlock(); return fell }()
		if err := run(ctx, p, a); err != nil {
			return err
		}
		after := func() int64 { mu.Lock(); defer mu.Unlock(); return fell }()
		inPlaceAllToAll := a.Kind == transport.KindAllToAll && algos.SameMemory(a.Send, a.Recv)
		if after != before && a.Count > 0 && p.Size() > 1 && len(a.Recv) > 0 && !inPlaceAllToAll {
			return fmt.Errorf("rank %d: direct fell back on %s of %d elements", p.Rank(), a.Kind, a.Count)
		}
		return nil
	}
	algostest.MatrixFunc(t, direct.Name, strict, direct.Algorithm{}.Supports, algostest.Options{Large: true})
}

func TestFailures(t *testing.T) {
	s := &shared{allocs: map[int][2][]byte{}, skip: -1}
	var fell int64
	var mu sync.Mutex
	algostest.CheckFailures(t, direct.Name, runner(s, &fell, &mu), direct.Algorithm{}.Supports)
}

// TestOneRankNotShared: when one rank's buffers are not shared, every rank gets
// ErrNotShared for the call (and the links stay in step: the next call still works).
func TestOneRankNotShared(t *testing.T) {
	for _, k := range []transport.Kind{transport.KindAllReduce, transport.KindReduceScatter, transport.KindAllGather, transport.KindBroadcast} {
		for _, w := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/world%d", k, w), func(t *testing.T) {
				ctx := context.Background()
				m, err := algostest.NewMesh(ctx, w)
				require.NoError(t, err)
				defer m.Close()
				for _, skip := range []int{w - 1, -1} {
					s := &shared{allocs: map[int][2][]byte{}, skip: skip}
					args := make([]*algos.Args, w)
					count := 100
					for r := range w {
						in, out := count, count
						switch k {
						case transport.KindReduceScatter:
							in = count * w
						case transport.KindAllGather:
							out = count * w
						}
						args[r] = &algos.Args{Kind: k, Send: make([]byte, 4*in), Recv: make([]byte, 4*out), Count: count,
							DType: transport.Float32, Op: transport.Sum, Root: 0, SendPeer: -1, RecvPeer: -1}
						s.allocs[r] = [2][]byte{args[r].Send, args[r].Recv}
					}
					// A rank that returns an error closes its links (the mesh plays an
					// aborted communicator), so keep the errors aside.
					errs := make([]error, w)
					runErrs := m.Run(ctx, args, func(ctx context.Context, p algos.Peers, a *algos.Args) error {
						errs[p.Rank()] = direct.Algorithm{}.Run(ctx, sharedPeers{p, s}, a)
						return nil
					})
					require.NoError(t, algostest.FirstError(runErrs))
					for r, err := range errs {
						if skip >= 0 && !(k == transport.KindBroadcast && skip != 0) {
							require.ErrorIs(t, err, direct.ErrNotShared, "rank %d", r)
						} else {
							require.NoError(t, err, "rank %d", r)
						}
					}
				}
			})
		}
	}
}

// TestNoSharedMemory: a group without the ability, or with no allocations, falls back
// at once, with no message sent.
func TestNoSharedMemory(t *testing.T) {
	ctx := context.Background()
	m, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer m.Close()
	args := []*algos.Args{
		{Kind: transport.KindAllReduce, Send: make([]byte, 8), Recv: make([]byte, 8), Count: 2, DType: transport.Float32, SendPeer: -1, RecvPeer: -1},
		{Kind: transport.KindAllReduce, Send: make([]byte, 8), Recv: make([]byte, 8), Count: 2, DType: transport.Float32, SendPeer: -1, RecvPeer: -1},
	}
	errs := make([]error, 2)
	require.NoError(t, algostest.FirstError(m.Run(ctx, args, func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		errs[p.Rank()] = direct.Algorithm{}.Run(ctx, p, a) // the mesh's Peers have no Shared ability
		return nil
	})))
	for _, err := range errs {
		require.ErrorIs(t, err, direct.ErrNotShared)
	}
	// The links carry nothing stale: the ring runs next on the same mesh.
	for _, err := range m.RunAlgorithm(ctx, ring.Algorithm{}, args) {
		require.NoError(t, err)
	}
}

// TestUnsupportedKind names what direct implements.
func TestUnsupportedKind(t *testing.T) {
	ctx := context.Background()
	m, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer m.Close()
	args := []*algos.Args{
		{Kind: transport.KindReduce, Send: make([]byte, 8), Recv: make([]byte, 8), Count: 2, DType: transport.Float32, SendPeer: -1, RecvPeer: -1},
		{Kind: transport.KindReduce, Send: make([]byte, 8), Count: 2, DType: transport.Float32, SendPeer: -1, RecvPeer: -1},
	}
	for _, err := range m.RunAlgorithm(ctx, direct.Algorithm{}, args) {
		require.ErrorIs(t, err, transport.ErrNotSupported)
		require.ErrorContains(t, err, "allreduce, reducescatter, allgather, broadcast, scatter, alltoall")
	}
}

// TestEager: no send of more than the eager size waits for its receiver before this
// rank receives (algostest.CheckEager).
func TestEager(t *testing.T) {
	s := &shared{allocs: map[int][2][]byte{}, skip: -1}
	var fell int64
	var mu sync.Mutex
	algostest.CheckEager(t, direct.Name, runner(s, &fell, &mu), direct.Algorithm{}.Supports)
}
