package algos_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// streamConn is a transport.Streamer that delivers one stored message in random pieces,
// in random order, split anywhere (also inside elements).
type streamConn struct {
	payload []byte
	rng     *rand.Rand
	fail    bool // deliver one piece, then fail
}

func (c *streamConn) Peer() int                                            { return 1 }
func (c *streamConn) Send(context.Context, transport.Header, []byte) error { return nil }
func (c *streamConn) Close() error                                         { return nil }
func (c *streamConn) Recv(_ context.Context, _ transport.Header, b []byte) error {
	copy(b, c.payload)
	return nil
}

func (c *streamConn) RecvStream(_ context.Context, _ transport.Header, n int, fn func(int, []byte) error) error {
	cuts := []int{0, n}
	for range c.rng.IntN(12) {
		cuts = append(cuts, c.rng.IntN(n+1))
	}
	slicesSort(cuts)
	type piece struct{ lo, hi int }
	var ps []piece
	for i := 1; i < len(cuts); i++ {
		ps = append(ps, piece{cuts[i-1], cuts[i]})
	}
	c.rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	if c.fail && len(ps) == 1 {
		ps = append(ps, piece{n, n})
	}
	for i, p := range ps {
		if c.fail && i == 1 {
			return errors.New("link broke")
		}
		// The piece is only valid during the call: hand over a copy and scribble on it after.
		b := append([]byte(nil), c.payload[p.lo:p.hi]...)
		if err := fn(p.lo, b); err != nil {
			return err
		}
		for k := range b {
			b[k] = 0xff
		}
	}
	return nil
}

func slicesSort(x []int) {
	for i := 1; i < len(x); i++ {
		for j := i; j > 0 && x[j] < x[j-1]; j-- {
			x[j], x[j-1] = x[j-1], x[j]
		}
	}
}

type onePeer struct{ c transport.Conn }

func (p onePeer) Rank() int                          { return 0 }
func (p onePeer) Size() int                          { return 2 }
func (p onePeer) Link(int) transport.Conn            { return p.c }
func (p onePeer) Header(tag uint32) transport.Header { return transport.Header{Tag: tag} }

func TestRecvReduceStreamed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, dt := range transport.DTypes {
		for _, n := range []int{0, 1, 3, 17, 100} {
			nb := n * dt.Size()
			a, in := make([]byte, nb), make([]byte, nb)
			for i := range a {
				a[i], in[i] = byte(rng.IntN(64)), byte(rng.IntN(64)) // small: no NaN patterns
			}
			want := make([]byte, nb)
			require.NoError(t, reduce.Apply3(dt, transport.Sum, want, a, in))
			for _, streamed := range []bool{true, false} {
				var c transport.Conn = &streamConn{payload: in, rng: rng}
				if !streamed {
					c = plainConn{c}
				}
				dst := make([]byte, nb)
				require.NoError(t, algos.RecvReduce(context.Background(), onePeer{c}, 1, 7, dt, transport.Sum, dst, a))
				require.Equal(t, want, dst, "%s n=%d streamed=%v", dt, n, streamed)
				inplace := append([]byte(nil), a...)
				require.NoError(t, algos.RecvReduce(context.Background(), onePeer{c}, 1, 7, dt, transport.Sum, inplace, inplace))
				require.Equal(t, string(want), string(inplace), "%s n=%d in-place", dt, n)
			}
		}
	}
	c := &streamConn{payload: make([]byte, 400), rng: rng, fail: true}
	err := algos.RecvReduce(context.Background(), onePeer{c}, 1, 7, transport.Float32, transport.Sum, make([]byte, 400), make([]byte, 400))
	require.ErrorContains(t, err, "recv 400 bytes from rank 1 (tag 0x7): link broke")
	err = algos.RecvReduce(context.Background(), onePeer{c}, 1, 7, transport.Float32, transport.Sum, make([]byte, 8), make([]byte, 4))
	require.ErrorIs(t, err, transport.ErrInvalid)
}

// plainConn hides the Streamer ability.
type plainConn struct{ transport.Conn }

func TestChunks(t *testing.T) {
	for _, n := range []int{0, 1, 7, 24, 25, 1000} {
		for _, size := range []int{1, 8, 24, 4096} {
			k := algos.NumChunks(n, size)
			require.GreaterOrEqual(t, k, 1)
			end := 0
			for i := range k {
				lo, hi := algos.Chunk(n, size, i)
				require.Equal(t, end, lo, "chunks are contiguous")
				require.LessOrEqual(t, hi-lo, size)
				if n > 0 {
					require.Positive(t, hi-lo, "only an empty range has an empty chunk")
				}
				end = hi
			}
			require.Equal(t, n, end, "chunks cover the range")
		}
	}
	a := &algos.Args{DType: transport.Float64, ChunkBytes: 20}
	require.Equal(t, 16, algos.ChunkSize(a, 0), "rounded down to whole elements")
	a.ChunkBytes = 3
	require.Equal(t, 8, algos.ChunkSize(a, 0), "at least one element")
	a.ChunkBytes = 0
	require.Equal(t, algos.DefaultChunkBytes, algos.ChunkSize(a, algos.DefaultChunkBytes))
}

func TestProgress(t *testing.T) {
	var p algos.Progress
	done := make(chan error, 1)
	go func() { done <- p.Wait(context.Background(), 3) }()
	for range 3 {
		p.Advance()
	}
	require.NoError(t, <-done)
	require.NoError(t, p.Wait(context.Background(), 2), "already reached")

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(time.Millisecond); cancel() }()
	require.ErrorIs(t, p.Wait(ctx, 10), context.Canceled)
}

func TestTag(t *testing.T) {
	require.NotEqual(t, algos.Tag(algos.TagRing, 1, 5), algos.Tag(algos.TagTree, 1, 5))
	require.NotEqual(t, algos.Tag(algos.TagRing, 1, 5), algos.Tag(algos.TagRing, 2, 5))
	require.Equal(t, algos.Tag(algos.TagRing, 1, 5), algos.Tag(algos.TagRing, 1, 5+1<<24), "the index wraps")
}

func TestScratch(t *testing.T) {
	b := algos.GetScratch(1000)
	require.Len(t, b, 1000)
	algos.PutScratch(b)
	require.Len(t, algos.GetScratch(3000), 3000)
	require.Nil(t, algos.GetScratch(0))
	algos.PutScratch(make([]byte, 10)) // a foreign buffer is ignored, not pooled
}
