package staged_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/ring"
	"github.com/goccl/goccl/algos/staged"
	"github.com/goccl/goccl/transport"
)

// stagingPeers stands in for the communicator's staging area where the ranks are
// goroutines of one process (as algostest's meshes are): every rank's part is an
// ordinary slice that the other goroutines read directly, through the same Stager
// contract the communicator implements over shm windows (tested there, between
// processes). The part size is odd on purpose, so windows end mid-way through the
// vector and slices are uneven.
type stagingPeers struct {
	algos.Peers
	parts [][]byte
}

func (p stagingPeers) Staging(context.Context) ([][]byte, error) { return p.parts, nil }

// runner returns a RunFunc whose ranks share parts of partBytes bytes, allocated per
// world size on first use by any rank (the mesh runs one call at a time).
func runner(partBytes int) algostest.RunFunc {
	areas := map[int][][]byte{}
	ready := make(chan struct{}, 1)
	ready <- struct{}{}
	return func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		<-ready
		parts, ok := areas[p.Size()]
		if !ok {
			parts = make([][]byte, p.Size())
			for r := range parts {
				parts[r] = make([]byte, partBytes)
			}
			areas[p.Size()] = parts
		}
		ready <- struct{}{}
		return staged.Algorithm{}.Run(ctx, stagingPeers{p, parts}, a)
	}
}

// TestMatrix runs the standard matrix (every dtype and op, worlds 1-8, counts 0, 1, 7,
// 13, 1000, in place and not) against the float64 reference, through parts that hold
// windows of a few dozen elements (many windows per call, the last one short), and then
// the large cases through parts of two sizes: windows of ~96 KiB, and windows of ~3 MiB
// whose slices are copied in several pieces (copyCached), the last one short.
func TestMatrix(t *testing.T) {
	algostest.MatrixFunc(t, staged.Name, runner(2*8*37+5), staged.Algorithm{}.Supports, algostest.Options{})
	for _, part := range []int{2*(96<<10) + 13, 2*(3<<20) + 13} {
		algostest.MatrixFunc(t, fmt.Sprintf("%s-large-part%d", staged.Name, part), runner(part), staged.Algorithm{}.Supports,
			algostest.Options{Worlds: []int{}, Large: true})
	}
}

func TestFailures(t *testing.T) {
	algostest.CheckFailures(t, staged.Name, runner(2*4*64+3), staged.Algorithm{}.Supports)
}

// TestNoStaging: Peers without a staging area give every rank ErrNoStaging at once,
// with no message sent, and the links stay in step (the ring runs next on the same mesh).
func TestNoStaging(t *testing.T) {
	for _, w := range []int{2, 3} {
		t.Run(fmt.Sprintf("world%d", w), func(t *testing.T) {
			ctx := context.Background()
			m, err := algostest.NewMesh(ctx, w)
			require.NoError(t, err)
			defer m.Close()
			args := make([]*algos.Args, w)
			for r := range args {
				args[r] = &algos.Args{Kind: transport.KindAllReduce, Send: make([]byte, 40), Recv: make([]byte, 40), Count: 10,
					DType: transport.Float32, Op: transport.Sum, SendPeer: -1, RecvPeer: -1}
			}
			errs := make([]error, w)
			require.NoError(t, algostest.FirstError(m.Run(ctx, args, func(ctx context.Context, p algos.Peers, a *algos.Args) error {
				errs[p.Rank()] = staged.Algorithm{}.Run(ctx, p, a) // the mesh's Peers are no Stager
				return nil
			})))
			for r, err := range errs {
				require.ErrorIs(t, err, algos.ErrNoStaging, "rank %d", r)
				require.True(t, staged.Unavailable(err))
			}
			for _, err := range m.RunAlgorithm(ctx, ring.Algorithm{}, args) {
				require.NoError(t, err)
			}
		})
	}
}

// TestTooSmall: a part whose slot (half of it) holds no window is no staging area
// (every rank sees the same sizes, so every rank says so): one element per rank for
// AllReduce and per block for ReduceScatter, one element for AllGather. A 40-byte part
// still holds an AllGather window of two float64 elements, and the call runs.
func TestTooSmall(t *testing.T) {
	const w, count = 3, 5
	for _, tc := range []struct {
		kind    transport.Kind
		part    int
		wantErr string
	}{
		{transport.KindAllReduce, 40, "a staging part of 40 bytes holds no window of a 3-rank allreduce of float64"},
		{transport.KindReduceScatter, 40, "a staging part of 40 bytes holds no window of a 3-rank reducescatter of float64"},
		{transport.KindAllGather, 14, "a staging part of 14 bytes holds no window of a 3-rank allgather of float64"},
		{transport.KindAllGather, 40, ""},
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.kind, tc.part), func(t *testing.T) {
			ctx := context.Background()
			m, err := algostest.NewMesh(ctx, w)
			require.NoError(t, err)
			defer m.Close()
			parts := make([][]byte, w)
			args := make([]*algos.Args, w)
			for r := range args {
				parts[r] = make([]byte, tc.part)
				send := make([]byte, 8*count*w)
				for i := range count * w {
					binary.LittleEndian.PutUint64(send[8*i:], math.Float64bits(float64(100*r+i)))
				}
				sendN, recvN := 8*count, 8*count*w // allgather's
				if tc.kind != transport.KindAllGather {
					sendN, recvN = 8*count*w, 8*count // as each kind needs them
				}
				args[r] = &algos.Args{Kind: tc.kind, Send: send[:sendN], Recv: make([]byte, recvN), Count: count,
					DType: transport.Float64, Op: transport.Sum, SendPeer: -1, RecvPeer: -1}
			}
			errs := m.Run(ctx, args, func(ctx context.Context, p algos.Peers, a *algos.Args) error {
				return staged.Algorithm{}.Run(ctx, stagingPeers{p, parts}, a)
			})
			for r, err := range errs {
				if tc.wantErr != "" {
					require.ErrorIs(t, err, algos.ErrNoStaging, "rank %d", r)
					require.ErrorContains(t, err, tc.wantErr)
					continue
				}
				require.NoError(t, err, "rank %d", r)
				for q := range w { // block q is rank q's first count elements
					for i := range count {
						got := math.Float64frombits(binary.LittleEndian.Uint64(args[r].Recv[8*(q*count+i):]))
						require.Equal(t, float64(100*q+i), got, "rank %d, block %d, element %d", r, q, i)
					}
				}
			}
		})
	}
}

// TestUnsupportedKind names what staged implements.
func TestUnsupportedKind(t *testing.T) {
	ctx := context.Background()
	m, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer m.Close()
	args := []*algos.Args{
		{Kind: transport.KindReduce, Send: make([]byte, 8), Recv: make([]byte, 8), Count: 2, DType: transport.Float32, SendPeer: -1, RecvPeer: -1},
		{Kind: transport.KindReduce, Send: make([]byte, 8), Recv: make([]byte, 8), Count: 2, DType: transport.Float32, SendPeer: -1, RecvPeer: -1},
	}
	for _, err := range m.RunAlgorithm(ctx, staged.Algorithm{}, args) {
		require.ErrorIs(t, err, transport.ErrNotSupported)
		require.ErrorContains(t, err, "staged implements allreduce, allgather, reducescatter and broadcast")
	}
}

func BenchmarkAllReduce(b *testing.B) { algostest.BenchAllReduce(b, stagedBench{}) }

// stagedBench runs staged through parts of the communicator's default size.
type stagedBench struct{}

var benchRun = runner(4 << 20)

func (stagedBench) Name() string                   { return staged.Name }
func (stagedBench) Supports(k transport.Kind) bool { return staged.Algorithm{}.Supports(k) }
func (stagedBench) Run(ctx context.Context, p algos.Peers, a *algos.Args) error {
	return benchRun(ctx, p, a)
}

// TestEager: no send of more than the eager size waits for its receiver before this
// rank receives (algostest.CheckEager).
func TestEager(t *testing.T) {
	algostest.CheckEager(t, staged.Name, runner(2*8*37+5), staged.Algorithm{}.Supports)
}
