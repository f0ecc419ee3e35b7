package transporttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

// blocked starts f in a goroutine and returns a channel with its result. The suite waits
// a little before acting so that f is (very likely) blocked; if it is not yet, the check
// still holds, because the action must make a later block return too.
func blocked(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	time.Sleep(50 * time.Millisecond)
	return ch
}

// await returns f's result, failing the test if it does not arrive within the suite's
// timeout (a hang, which the contract forbids).
func await(t *testing.T, ch <-chan error, opt Options, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(opt.Timeout):
		t.Fatalf("%s did not return within %v", what, opt.Timeout)
		return nil
	}
}

func testCancel(t *testing.T, tr transport.Transport, opt Options) {
	t.Run("RecvCancel", func(t *testing.T) {
		conns := Mesh(t, tr, 2, opt)
		ctx, cancel := context.WithCancel(context.Background())
		ch := blocked(func() error { return conns[0][1].Recv(ctx, Header(0, 10, 0), make([]byte, 10)) })
		cancel()
		err := await(t, ch, opt, "Recv after cancel")
		require.Error(t, err)
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("RecvDeadline", func(t *testing.T) {
		conns := Mesh(t, tr, 2, opt)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		ch := blocked(func() error { return conns[0][1].Recv(ctx, Header(0, 1<<20, 0), make([]byte, 1<<20)) })
		err := await(t, ch, opt, "Recv past its deadline")
		require.Error(t, err)
		require.True(t, errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.DeadlineExceeded),
			"want ErrTimeout or DeadlineExceeded, got %v", err)
	})
	if opt.SkipCancelSend {
		return
	}
	t.Run("SendOnFullLink", func(t *testing.T) {
		conns := Mesh(t, tr, 2, opt)
		ctx, cancel := context.WithCancel(context.Background())
		n := min(opt.MaxMessage, 1<<20)
		payload := Pattern(n, 9)
		var sent atomic.Int64
		const limit = 1 << 30 // far beyond any sane link buffering
		ch := make(chan error, 1)
		go func() {
			for i := 0; sent.Load() < limit; i++ {
				if err := conns[0][1].Send(ctx, Header(uint64(i), n, 0), payload); err != nil {
					ch <- err
					return
				}
				sent.Add(int64(n))
			}
			ch <- nil
		}()
		// Wait until the sender stops making progress (the link is full), then cancel.
		last := int64(-1)
		for deadline := time.Now().Add(opt.Timeout); time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			cur := sent.Load()
			if cur == last || cur >= limit {
				break
			}
			last = cur
		}
		cancel()
		err := await(t, ch, opt, "Send on a full link after cancel")
		require.Error(t, err, "Send never blocked after %d bytes with no receiver", sent.Load())
		require.ErrorIs(t, err, context.Canceled)
	})
}

func testClose(t *testing.T, tr transport.Transport, opt Options) {
	peerErr := func(t *testing.T, err error, what string) {
		t.Helper()
		require.Error(t, err, what)
		require.True(t, errors.Is(err, transport.ErrPeer) || errors.Is(err, transport.ErrClosed),
			"%s: want ErrPeer or ErrClosed, got %v", what, err)
	}
	t.Run("PeerCloseUnblocksRecv", func(t *testing.T) {
		conns := Mesh(t, tr, 2, opt)
		ctx := opt.ctx(t)
		ch := blocked(func() error { return conns[1][0].Recv(ctx, Header(0, 10, 0), make([]byte, 10)) })
		require.NoError(t, conns[0][1].Close())
		peerErr(t, await(t, ch, opt, "Recv after the peer closed"), "Recv after the peer closed")
		ch = blocked(func() error { return conns[1][0].Send(ctx, Header(1, 10, 0), make([]byte, 10)) })
		peerErr(t, await(t, ch, opt, "Send after the peer closed"), "Send after the peer closed")
	})
	t.Run("PeerCloseFailsSend", func(t *testing.T) {
		conns := Mesh(t, tr, 2, opt)
		ctx := opt.ctx(t)
		require.NoError(t, conns[0][1].Close())
		// The first sends may still land in buffers; within a bounded number the loss
		// of the peer must surface.
		ch := make(chan error, 1)
		go func() {
			p := Pattern(64<<10, 3)
			for i := range 4096 {
				if err := conns[1][0].Send(ctx, Header(uint64(i), len(p), 0), p); err != nil {
					ch <- err
					return
				}
			}
			ch <- nil
		}()
		peerErr(t, await(t, ch, opt, "Send to a closed peer"), "Send to a closed peer (256 MiB sent without error)")
	})
	t.Run("OwnCloseUnblocksRecv", func(t *testing.T) {
		conns := Mesh(t, tr, 2, opt)
		ctx := opt.ctx(t)
		ch := blocked(func() error { return conns[0][1].Recv(ctx, Header(0, 10, 0), make([]byte, 10)) })
		require.NoError(t, conns[0][1].Close())
		peerErr(t, await(t, ch, opt, "Recv after Close"), "Recv after its own Close")
		err := conns[0][1].Send(ctx, Header(0, 1, 0), []byte{1})
		require.ErrorIs(t, err, transport.ErrClosed, "Send after Close")
		require.NoError(t, conns[0][1].Close(), "a second Close must be harmless")
	})
}

func testStreamer(t *testing.T, tr transport.Transport, opt Options) {
	conns := Mesh(t, tr, 2, opt)
	rs, ok := conns[1][0].(transport.Streamer)
	if !ok {
		t.Skipf("%s links do not implement transport.Streamer", tr.Name())
	}
	sizes := append(Sizes(opt.MaxMessage), 256<<10, 256<<10+1, 3<<20+5)
	for i, n := range sizes {
		if n > opt.MaxMessage {
			continue
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := opt.ctx(t)
			h := Header(uint64(i), n, 0)
			want := Pattern(n, uint64(n)+7)
			var g group
			g.Go(func() error { return conns[0][1].Send(ctx, h, want) })
			got := make([]byte, n)
			var spans [][2]int
			var inFn atomic.Int32
			err := rs.RecvStream(ctx, h, n, func(off int, p []byte) error {
				if inFn.Add(1) != 1 {
					return errors.New("fn called concurrently")
				}
				defer inFn.Add(-1)
				if off < 0 || off+len(p) > n {
					return fmt.Errorf("piece [%d, %d) outside [0, %d)", off, off+len(p), n)
				}
				spans = append(spans, [2]int{off, off + len(p)})
				copy(got[off:], p)
				return nil
			})
			require.NoError(t, err)
			require.NoError(t, g.Wait())
			require.NoError(t, coverage(spans, n))
			require.Empty(t, Diff(got, want))
		})
	}
	t.Run("Mismatch", func(t *testing.T) {
		conns := Mesh(t, tr, 2, opt)
		rs := conns[1][0].(transport.Streamer)
		ctx := opt.ctx(t)
		go func() { _ = conns[0][1].Send(ctx, Header(1, 50, 0), Pattern(50, 1)) }()
		err := rs.RecvStream(ctx, Header(2, 50, 0), 50, func(int, []byte) error { return nil })
		require.ErrorIs(t, err, transport.ErrMismatch)
	})
	t.Run("FnError", func(t *testing.T) {
		conns := Mesh(t, tr, 2, opt)
		rs := conns[1][0].(transport.Streamer)
		ctx := opt.ctx(t)
		n := min(opt.MaxMessage, 2<<20)
		go func() { _ = conns[0][1].Send(ctx, Header(1, n, 0), Pattern(n, 1)) }()
		boom := errors.New("boom")
		err := rs.RecvStream(ctx, Header(1, n, 0), n, func(int, []byte) error { return boom })
		require.ErrorIs(t, err, boom)
	})
}

// testColdReceiver: RecvCold (transport.ColdReceiver) delivers what Recv would, byte
// for byte, at every size and at destinations that start off any alignment, and
// checks the header as Recv does.
func testColdReceiver(t *testing.T, tr transport.Transport, opt Options) {
	conns := Mesh(t, tr, 2, opt)
	cr, ok := conns[1][0].(transport.ColdReceiver)
	if !ok {
		t.Skipf("%s links do not implement transport.ColdReceiver", tr.Name())
	}
	sizes := append(Sizes(opt.MaxMessage), 4096, 64<<10+3, 256<<10+1, 3<<20+5)
	for i, n := range sizes {
		if n > opt.MaxMessage {
			continue
		}
		for _, skew := range []int{0, 1, 13, 32} {
			t.Run(fmt.Sprintf("%d+%d", n, skew), func(t *testing.T) {
				ctx := opt.ctx(t)
				h := Header(uint64(i*4+skew), n, 0)
				want := Pattern(n, uint64(n)+uint64(skew))
				var g group
				g.Go(func() error { return conns[0][1].Send(ctx, h, want) })
				// Guard bytes around the destination must stay as they were.
				buf := Pattern(n+skew+64, 99)
				guard := slices.Clone(buf)
				got := buf[skew : skew+n]
				require.NoError(t, cr.RecvCold(ctx, h, got))
				require.NoError(t, g.Wait())
				require.Empty(t, Diff(got, want))
				require.Equal(t, guard[:skew], buf[:skew], "bytes before the destination")
				require.Equal(t, guard[skew+n:], buf[skew+n:], "bytes after the destination")
			})
		}
	}
	t.Run("Mismatch", func(t *testing.T) {
		conns := Mesh(t, tr, 2, opt)
		cr := conns[1][0].(transport.ColdReceiver)
		ctx := opt.ctx(t)
		go func() { _ = conns[0][1].Send(ctx, Header(1, 50, 0), Pattern(50, 1)) }()
		require.ErrorIs(t, cr.RecvCold(ctx, Header(2, 50, 0), make([]byte, 50)), transport.ErrMismatch)
	})
}

// coverage checks that spans cover [0, n) exactly once.
func coverage(spans [][2]int, n int) error {
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	at := 0
	for _, s := range spans {
		if s[0] != at {
			return fmt.Errorf("pieces %v: byte %d missing or delivered twice (next piece starts at %d)", spans, at, s[0])
		}
		at = s[1]
	}
	if at != n {
		return fmt.Errorf("pieces cover [0, %d) of %d bytes", at, n)
	}
	return nil
}

// testEagerFloor has both ranks send two messages before either receives, at sizes up
// to what the link takes without a running receive (transport.Eager, else the
// transport.EagerFloor every Conn promises), that size included: the algorithms' small steps do exactly
// that, so a link that waits for its receiver deadlocks them. Every byte must arrive,
// in order. (A link that says it takes less is refused by goccl.Init.)
func testEagerFloor(t *testing.T, tr transport.Transport, opt Options) {
	conns := Mesh(t, tr, 2, opt)
	eager := transport.EagerFloor
	if e, ok := conns[0][1].(transport.Eager); ok {
		eager = e.EagerBytes()
	}
	sizes := []int{0, 1, 7, 64, 1000, 4097, transport.EagerFloor}
	if eager > transport.EagerFloor {
		sizes = append(sizes, eager) // what the link says it takes, not only the floor
	}
	for i, n := range sizes {
		if n > opt.MaxMessage || n > eager {
			continue
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := opt.ctx(t)
			var g group
			for r := range 2 {
				g.Go(func() error {
					l := conns[r][1-r]
					for m := range 2 {
						if err := l.Send(ctx, Header(uint64(2*i+m), n, 4), Pattern(n, uint64(r*1000+10*i+m))); err != nil {
							return fmt.Errorf("rank %d send %d: %w", r, m, err)
						}
					}
					got := make([]byte, n)
					for m := range 2 {
						if err := l.Recv(ctx, Header(uint64(2*i+m), n, 4), got); err != nil {
							return fmt.Errorf("rank %d recv %d: %w", r, m, err)
						}
						if d := Diff(got, Pattern(n, uint64((1-r)*1000+10*i+m))); d != "" {
							return fmt.Errorf("rank %d message %d: %s", r, m, d)
						}
					}
					return nil
				})
			}
			require.NoError(t, g.Wait())
		})
	}
}
