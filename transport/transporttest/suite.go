package transporttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// Run checks tr against the transport.Conn contract. Each check is a subtest with its
// own communicator, so one failure does not cascade into the others.
func Run(t *testing.T, tr transport.Transport, opt Options) {
	opt = opt.withDefaults()
	t.Run("OpenRejectsBadRank", func(t *testing.T) { testOpenBadRank(t, tr, opt) })
	t.Run("Mesh", func(t *testing.T) { testMesh(t, tr, opt) })
	t.Run("ConnectSelf", func(t *testing.T) { testConnectSelf(t, tr, opt) })
	t.Run("CanConnectSymmetric", func(t *testing.T) { testCanConnect(t, tr, opt) })
	t.Run("Ordering", func(t *testing.T) { testOrdering(t, tr, opt) })
	t.Run("Sizes", func(t *testing.T) { testSizes(t, tr, opt) })
	t.Run("ConcurrentPeers", func(t *testing.T) { testConcurrentPeers(t, tr, opt) })
	t.Run("FullDuplex", func(t *testing.T) { testFullDuplex(t, tr, opt) })
	t.Run("EagerFloor", func(t *testing.T) { testEagerFloor(t, tr, opt) })
	t.Run("Mismatch", func(t *testing.T) { testMismatch(t, tr, opt) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, tr, opt) })
	if !opt.SkipClose {
		t.Run("Close", func(t *testing.T) { testClose(t, tr, opt) })
	}
	if !opt.SkipStreamer {
		t.Run("Streamer", func(t *testing.T) { testStreamer(t, tr, opt) })
	}
	t.Run("ColdReceiver", func(t *testing.T) { testColdReceiver(t, tr, opt) })
	t.Run("Reserver", func(t *testing.T) { testReserver(t, tr, opt) })
	t.Run("Random", func(t *testing.T) { testRandom(t, tr, opt) })
}

func (o Options) ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	t.Cleanup(cancel)
	return ctx
}

func testOpenBadRank(t *testing.T, tr transport.Transport, opt Options) {
	store := rendezvous.NewMemStore()
	defer store.Close()
	for _, tc := range []struct{ rank, world int }{{-1, 2}, {2, 2}, {7, 2}, {0, 0}} {
		t.Run(fmt.Sprintf("rank=%d/world=%d", tc.rank, tc.world), func(t *testing.T) {
			ep, err := tr.Open(opt.ctx(t), Local(CommID("bad"), tc.rank, tc.world, store, opt))
			if ep != nil {
				_ = ep.Close()
			}
			require.Error(t, err, "Open accepted rank %d in a world of %d", tc.rank, tc.world)
			require.ErrorIs(t, err, transport.ErrInvalid)
		})
	}
}

// testMesh connects every pair for each world size and sends one message each way per
// pair, all at once.
func testMesh(t *testing.T, tr transport.Transport, opt Options) {
	for _, w := range opt.Worlds {
		t.Run(fmt.Sprintf("W=%d", w), func(t *testing.T) {
			conns := Mesh(t, tr, w, opt)
			ctx := opt.ctx(t)
			var g group
			for i := range w {
				for j := range w {
					if i < j {
						g.Go(func() error {
							return SendRecv(ctx, conns[i][j], conns[j][i], Header(1, 33, 0), Pattern(33, uint64(i*w+j)))
						})
						g.Go(func() error {
							return SendRecv(ctx, conns[j][i], conns[i][j], Header(1, 33, 0), Pattern(33, uint64(j*w+i)))
						})
					}
				}
			}
			require.NoError(t, g.Wait())
		})
	}
}

func testConnectSelf(t *testing.T, tr transport.Transport, opt Options) {
	eps, infos := Open(t, tr, 2, opt)
	c, err := eps[0].Connect(opt.ctx(t), infos[0])
	if c != nil {
		_ = c.Close()
	}
	require.Error(t, err, "Connect to its own rank must be rejected")
	require.ErrorIs(t, err, transport.ErrInvalid)
}

func testCanConnect(t *testing.T, tr transport.Transport, opt Options) {
	eps, infos := Open(t, tr, 3, opt)
	for i := range eps {
		for j := range eps {
			if i == j {
				continue
			}
			ij, ji := eps[i].CanConnect(infos[j]), eps[j].CanConnect(infos[i])
			require.Equal(t, ij == nil, ji == nil, "CanConnect(%d->%d)=%v but CanConnect(%d->%d)=%v", i, j, ij, j, i, ji)
		}
	}
	// A peer whose handle is not from this transport must not pass.
	bogus := transport.PeerInfo{Rank: 1, Host: "elsewhere", Pid: os.Getpid(), Handle: []byte("\x00not a handle\xff")}
	require.Error(t, eps[0].CanConnect(bogus), "CanConnect accepted a garbage handle")
}

func testOrdering(t *testing.T, tr transport.Transport, opt Options) {
	conns := Mesh(t, tr, 2, opt)
	ctx := opt.ctx(t)
	const n = 2000
	size := func(i int) int {
		if i%250 == 249 {
			return 300<<10 + i // big enough to be striped by transports that stripe
		}
		return i % 97
	}
	var g group
	g.Go(func() error {
		for i := range n {
			if err := conns[0][1].Send(ctx, Header(uint64(i), size(i), uint32(i%7)), Pattern(size(i), uint64(i))); err != nil {
				return fmt.Errorf("send message %d: %w", i, err)
			}
		}
		return nil
	})
	g.Go(func() error {
		for i := range n {
			got := make([]byte, size(i))
			if err := conns[1][0].Recv(ctx, Header(uint64(i), size(i), uint32(i%7)), got); err != nil {
				return fmt.Errorf("recv message %d: %w", i, err)
			}
			if d := Diff(got, Pattern(size(i), uint64(i))); d != "" {
				return fmt.Errorf("message %d: %s", i, d)
			}
		}
		return nil
	})
	require.NoError(t, g.Wait())
}

// Sizes returns the message sizes the suite sends: 0, 1, odd, page, odd megabyte, max.
func Sizes(max int) []int {
	out := []int{}
	for _, n := range []int{0, 1, 7, 4 << 10, 1<<20 + 3, max} {
		if n <= max {
			out = append(out, n)
		}
	}
	return out
}

func testSizes(t *testing.T, tr transport.Transport, opt Options) {
	conns := Mesh(t, tr, 2, opt)
	for i, n := range Sizes(opt.MaxMessage) {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := opt.ctx(t)
			p := Pattern(n, uint64(n))
			require.NoError(t, SendRecv(ctx, conns[0][1], conns[1][0], Header(uint64(i), n, 1), p))
			require.NoError(t, SendRecv(ctx, conns[1][0], conns[0][1], Header(uint64(i), n, 2), p))
		})
	}
}

func testConcurrentPeers(t *testing.T, tr transport.Transport, opt Options) {
	const w, msgs = 4, 6
	conns := Mesh(t, tr, w, opt)
	ctx := opt.ctx(t)
	size := func(i, j, m int) int { return (m%3)*(min(opt.MaxMessage, 1<<20)/2) + 13*i + j }
	var g group
	for i := range w {
		for j := range w {
			if i == j {
				continue
			}
			g.Go(func() error {
				for m := range msgs {
					n := size(i, j, m)
					if err := conns[i][j].Send(ctx, Header(uint64(m), n, 0), Pattern(n, uint64(i<<16|j<<8|m))); err != nil {
						return fmt.Errorf("rank %d send %d to rank %d: %w", i, m, j, err)
					}
				}
				return nil
			})
			g.Go(func() error {
				for m := range msgs {
					n := size(j, i, m)
					got := make([]byte, n)
					if err := conns[i][j].Recv(ctx, Header(uint64(m), n, 0), got); err != nil {
						return fmt.Errorf("rank %d recv %d from rank %d: %w", i, m, j, err)
					}
					if d := Diff(got, Pattern(n, uint64(j<<16|i<<8|m))); d != "" {
						return fmt.Errorf("rank %d message %d from rank %d: %s", i, m, j, d)
					}
				}
				return nil
			})
		}
	}
	require.NoError(t, g.Wait())
}

func testFullDuplex(t *testing.T, tr transport.Transport, opt Options) {
	conns := Mesh(t, tr, 2, opt)
	ctx := opt.ctx(t)
	n := min(opt.MaxMessage, 16<<20)
	const msgs = 4
	var g group
	for a := range 2 {
		b := 1 - a
		g.Go(func() error {
			for m := range msgs {
				if err := conns[a][b].Send(ctx, Header(uint64(m), n, 0), Pattern(n, uint64(a*msgs+m))); err != nil {
					return fmt.Errorf("rank %d send %d: %w", a, m, err)
				}
			}
			return nil
		})
		g.Go(func() error {
			got := make([]byte, n)
			for m := range msgs {
				if err := conns[a][b].Recv(ctx, Header(uint64(m), n, 0), got); err != nil {
					return fmt.Errorf("rank %d recv %d: %w", a, m, err)
				}
				if d := Diff(got, Pattern(n, uint64(b*msgs+m))); d != "" {
					return fmt.Errorf("rank %d message %d: %s", a, m, d)
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

func testMismatch(t *testing.T, tr transport.Transport, opt Options) {
	sent := Header(5, 100, 3)
	otherFp := sent
	otherFp.Fp.DType = transport.Float32
	otherTag := sent
	otherTag.Tag = 4
	otherSeq := sent
	otherSeq.Seq = 6
	for _, tc := range []struct {
		name    string
		want    transport.Header
		wantLen int
	}{
		{"seq", otherSeq, 100},
		{"fingerprint", otherFp, 100},
		{"tag", otherTag, 100},
		{"longer", sent, 101},
		{"shorter", sent, 99},
		{"empty", sent, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conns := Mesh(t, tr, 2, opt)
			ctx := opt.ctx(t)
			sendErr := make(chan error, 1)
			go func() { sendErr <- conns[0][1].Send(ctx, sent, Pattern(100, 1)) }()
			err := conns[1][0].Recv(ctx, tc.want, make([]byte, tc.wantLen))
			require.Error(t, err, "Recv accepted %s (%d bytes) while expecting %s (%d bytes)", sent, 100, tc.want, tc.wantLen)
			require.ErrorIs(t, err, transport.ErrMismatch)
			var me *transport.MismatchError
			require.ErrorAs(t, err, &me)
			require.Equal(t, tc.want, me.Want)
			require.Equal(t, sent, me.Got)
			require.Equal(t, tc.wantLen, me.WantLen)
			require.Equal(t, 100, me.GotLen)
			require.Equal(t, 1, me.Rank)
			require.Equal(t, 0, me.Peer)
			_ = conns[1][0].Close()
			<-sendErr // a small message may or may not have been accepted; it must return
		})
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, transport.ErrTimeout)
}
