package transporttest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

// testReserver: a message written in place (transport.Reserver) arrives as Send's
// would, byte for byte, through Recv and RecvStream, at every size up to ReserveMax (at
// most 4 MiB), after ordinary messages that move where the reserved room starts (so
// that it wraps around a ring's end), with Advance called part way or not at all. Abort
// before any Advance leaves the link as it was; a reservation above ReserveMax, or a
// second one while one is open, is refused.
func testReserver(t *testing.T, tr transport.Transport, opt Options) {
	conns := Mesh(t, tr, 2, opt)
	res, ok := conns[0][1].(transport.Reserver)
	if !ok || res.ReserveMax() <= 0 {
		t.Skipf("%s links do not implement transport.Reserver", tr.Name())
	}
	// Up to 4 MiB: a ring's reservations are at most a quarter of it (shm's default
	// ring is 4 MiB), and a larger one that is a plain buffer (inmem allows 1 GiB) only
	// repeats the same copies; at 64 MiB they took 140 s of the race run.
	max := min(res.ReserveMax(), opt.MaxMessage, 4<<20)
	recv := conns[1][0]
	write := func(first, second []byte, want []byte) {
		require.Equal(t, len(want), len(first)+len(second))
		copy(first, want)
		copy(second, want[len(first):])
	}
	seq := uint64(0)
	for _, n := range []int{0, 1, 7, 64, 1000, 64<<10 + 3, max / 3, max} {
		if n > max {
			continue
		}
		for _, shift := range []int{100, 4096, 200 << 10} { // an ordinary message first
			for _, advance := range []bool{false, true} {
				t.Run(fmt.Sprintf("%d/after%d/advance=%v", n, shift, advance), func(t *testing.T) {
					ctx := opt.ctx(t)
					for rep := range 6 { // enough to go round a ring
						seq++
						lead, want := Pattern(shift, seq), Pattern(n, seq+1000)
						h0, h := Header(seq, shift, 1), Header(seq, n, 2)
						var g group
						g.Go(func() error {
							if err := conns[0][1].Send(ctx, h0, lead); err != nil {
								return err
							}
							first, second, err := res.Reserve(ctx, h, n)
							if err != nil {
								return err
							}
							write(first, second, want)
							if advance {
								res.Advance(n / 2)
								res.Advance(n / 4) // never goes back
							}
							return res.Commit(ctx)
						})
						got := make([]byte, shift)
						require.NoError(t, recv.Recv(ctx, h0, got))
						require.Empty(t, Diff(got, lead))
						got = make([]byte, n)
						if s, ok := recv.(transport.Streamer); ok && rep%2 == 1 {
							require.NoError(t, s.RecvStream(ctx, h, n, func(off int, p []byte) error {
								copy(got[off:], p)
								return nil
							}))
						} else {
							require.NoError(t, recv.Recv(ctx, h, got))
						}
						require.NoError(t, g.Wait())
						require.Empty(t, Diff(got, want), "message %d of %d bytes", rep, n)
					}
				})
			}
		}
	}
	t.Run("AbortBeforeAdvance", func(t *testing.T) {
		ctx := opt.ctx(t)
		first, second, err := res.Reserve(ctx, Header(1, 100, 3), 100)
		require.NoError(t, err)
		write(first, second, Pattern(100, 5))
		res.Abort()
		want := Pattern(300, 6)
		var g group
		g.Go(func() error { return conns[0][1].Send(ctx, Header(2, 300, 4), want) })
		got := make([]byte, 300)
		require.NoError(t, recv.Recv(ctx, Header(2, 300, 4), got), "the aborted message must not arrive")
		require.NoError(t, g.Wait())
		require.Empty(t, Diff(got, want))
	})
	t.Run("Refused", func(t *testing.T) {
		ctx := opt.ctx(t)
		_, _, err := res.Reserve(ctx, Header(1, 0, 0), res.ReserveMax()+1)
		require.ErrorIs(t, err, transport.ErrInvalid)
		_, _, err = res.Reserve(ctx, Header(1, 8, 0), 8)
		require.NoError(t, err)
		_, _, err = res.Reserve(ctx, Header(2, 8, 0), 8)
		require.ErrorIs(t, err, transport.ErrInvalid, "a second reservation while one is open")
		res.Abort()
		require.ErrorIs(t, res.Commit(ctx), transport.ErrInvalid, "commit without a reservation")
	})
}
