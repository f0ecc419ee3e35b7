package tcp_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/tcp"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// stripeParams makes every message of at least 4 KiB take the large-message path.
func stripeParams(socks int) transport.Params {
	return transport.Params{tcp.ParamAddr: "127.0.0.1:0", tcp.ParamSockets: strconv.Itoa(socks), tcp.ParamStripeMin: "4096"}
}

// TestStreamPieces checks what RecvStream promises its callers beyond the contract:
// the pieces cover the message exactly once, and each ends on a 64-byte boundary of
// the message or at its end, so no element of any dtype is ever split across pieces.
// Sizes: below and at the threshold, odd, not divisible by the socket count, large.
func TestStreamPieces(t *testing.T) {
	sizes := []int{4095, 4096, 4097, 3*4096 + 5, 1<<20 + 3, 6<<20 + 7}
	for _, socks := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("sockets=%d", socks), func(t *testing.T) {
			conns := transporttest.Mesh(t, tcp.Transport{}, 2, transporttest.Options{Params: stripeParams(socks)})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i, n := range sizes {
				want := transporttest.Pattern(n, uint64(1000*socks+i))
				h := transporttest.Header(uint64(i), n, 0)
				errc := make(chan error, 1)
				go func() { errc <- conns[0][1].Send(ctx, h, want) }()
				got := make([]byte, n)
				seen := make([]bool, n)
				err := conns[1][0].(transport.Streamer).RecvStream(ctx, h, n, func(off int, p []byte) error {
					end := off + len(p)
					if len(p) == 0 || off < 0 || end > n {
						return fmt.Errorf("piece [%d, %d) of %d bytes", off, end, n)
					}
					if n >= 4096 && (off%64 != 0 || end%64 != 0 && end != n) {
						return fmt.Errorf("piece [%d, %d) is not cut on 64-byte boundaries", off, end)
					}
					for j := off; j < end; j++ {
						if seen[j] {
							return fmt.Errorf("byte %d delivered twice", j)
						}
						seen[j] = true
					}
					copy(got[off:], p)
					return nil
				})
				require.NoError(t, err, "size %d", n)
				require.NoError(t, <-errc, "size %d", n)
				require.Empty(t, transporttest.Diff(got, want), "size %d", n)
			}
		})
	}
}

// TestLargeFullDuplex sends large messages both ways at once over every socket count,
// the pattern of a two-rank ring, and checks every byte.
func TestLargeFullDuplex(t *testing.T) {
	for _, socks := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("sockets=%d", socks), func(t *testing.T) {
			conns := transporttest.Mesh(t, tcp.Transport{}, 2, transporttest.Options{Params: stripeParams(socks)})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const n, msgs = 3<<20 + 11, 4
			errc := make(chan error, 4)
			for _, d := range [][2]int{{0, 1}, {1, 0}} {
				go func() {
					for m := range msgs {
						errc <- nil
						if err := conns[d[0]][d[1]].Send(ctx, transporttest.Header(uint64(m), n, uint32(d[0])), transporttest.Pattern(n, uint64(10*d[0]+m))); err != nil {
							errc <- err
							return
						}
					}
				}()
				go func() {
					got := make([]byte, n)
					for m := range msgs {
						if err := conns[d[1]][d[0]].Recv(ctx, transporttest.Header(uint64(m), n, uint32(d[0])), got); err != nil {
							errc <- err
							return
						}
						if diff := transporttest.Diff(got, transporttest.Pattern(n, uint64(10*d[0]+m))); diff != "" {
							errc <- fmt.Errorf("rank %d -> %d message %d: %s", d[0], d[1], m, diff)
							return
						}
					}
					errc <- errors.New("done")
				}()
			}
			for done := 0; done < 2; {
				err := <-errc
				if err != nil && err.Error() == "done" {
					done++
					continue
				}
				require.NoError(t, err)
			}
		})
	}
}

// TestLargeCancel: a large Send nobody reads and a large Recv nobody feeds both end
// with the context's error, not a hang, and name the peer.
func TestLargeCancel(t *testing.T) {
	const n = 64 << 20 // far more than the socket buffers hold
	for _, tc := range []struct {
		name string
		op   func(ctx context.Context, conns [][]transport.Conn) error
	}{
		{"send", func(ctx context.Context, conns [][]transport.Conn) error {
			return conns[0][1].Send(ctx, transporttest.Header(0, n, 0), make([]byte, n))
		}},
		{"recv", func(ctx context.Context, conns [][]transport.Conn) error {
			return conns[1][0].Recv(ctx, transporttest.Header(0, 1<<20, 0), make([]byte, 1<<20))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conns := transporttest.Mesh(t, tcp.Transport{}, 2, transporttest.Options{Params: stripeParams(2)})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- tc.op(ctx, conns) }()
			select {
			case err := <-errc:
				require.ErrorIs(t, err, transport.ErrTimeout)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Contains(t, err.Error(), "rank")
			case <-time.After(20 * time.Second):
				t.Fatal("a cancelled large transfer did not return")
			}
		})
	}
}

// TestLargePeerLost: the sender of a large message gives up half way (its context
// ends); the receiver, blocked in the middle of the message, gets a PeerError naming
// rank 0 instead of waiting for bytes that will never come.
func TestLargePeerLost(t *testing.T) {
	conns := transporttest.Mesh(t, tcp.Transport{}, 2, transporttest.Options{Params: stripeParams(2)})
	const n = 64 << 20
	h := transporttest.Header(0, n, 0)
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel() // a receive that fails before piece 8 leaves the sender to this
	sent := make(chan error, 1)
	go func() { sent <- conns[0][1].Send(sctx, h, make([]byte, n)) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pieces := 0
	var sendErr error
	err := conns[1][0].(transport.Streamer).RecvStream(ctx, h, n, func(int, []byte) error {
		if pieces++; pieces == 8 {
			// The sender stops with the message unfinished. The receiver reads no
			// further until it has: were it to go on draining, the sender could
			// write the rest before its cancellation took hold (the socket buffers
			// hold far less than the 60 MiB still to come, so it cannot finish).
			scancel()
			select {
			case sendErr = <-sent:
			case <-time.After(20 * time.Second):
				return errors.New("the cancelled sender did not return")
			}
		}
		return nil
	})
	require.ErrorIs(t, err, transport.ErrPeer)
	var pe *transport.PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 0, pe.Peer)
	require.ErrorIs(t, sendErr, context.Canceled)
}

// TestLargeStreamFnError: an error from fn in the middle of a striped stream is
// returned as is, breaks the link for later calls, and the sender is not left hanging.
func TestLargeStreamFnError(t *testing.T) {
	conns := transporttest.Mesh(t, tcp.Transport{}, 2, transporttest.Options{Params: stripeParams(2)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 32 << 20
	h := transporttest.Header(0, n, 0)
	sent := make(chan error, 1)
	go func() { sent <- conns[0][1].Send(ctx, h, make([]byte, n)) }()
	boom := errors.New("reducer refused the piece")
	calls := 0
	err := conns[1][0].(transport.Streamer).RecvStream(ctx, h, n, func(int, []byte) error {
		if calls++; calls == 3 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 3, calls, "fn must not be called after it failed")
	err = conns[1][0].Recv(ctx, transporttest.Header(1, 8, 0), make([]byte, 8))
	require.ErrorIs(t, err, boom, "the link stays broken with its first cause")
	require.ErrorIs(t, <-sent, transport.ErrPeer)
}

// TestEager checks the promise of transport.Eager against the kernel: two messages of
// EagerBytes each are sent with nobody receiving, and both Sends return; then both
// arrive intact. Buffers: the default, the kernel's own sizing (0), and a small one.
func TestEager(t *testing.T) {
	for _, buf := range []string{"", "0", "65536"} {
		t.Run("bufsize="+buf, func(t *testing.T) {
			p := transport.Params{tcp.ParamAddr: "127.0.0.1:0"}
			if buf != "" {
				p[tcp.ParamBufSize] = buf
			}
			conns := transporttest.Mesh(t, tcp.Transport{}, 2, transporttest.Options{Params: p})
			e, ok := conns[0][1].(transport.Eager)
			require.True(t, ok, "tcp links implement transport.Eager")
			n := e.EagerBytes()
			require.GreaterOrEqual(t, n, 16<<10, "the contract's floor")
			require.Equal(t, n, conns[1][0].(transport.Eager).EagerBytes(), "both ends agree")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for m := range 2 {
				require.NoError(t, conns[0][1].Send(ctx, transporttest.Header(uint64(m), n, 0), transporttest.Pattern(n, uint64(m))),
					"eager send %d of %d bytes must return with nobody receiving", m, n)
			}
			got := make([]byte, n)
			for m := range 2 {
				require.NoError(t, conns[1][0].Recv(ctx, transporttest.Header(uint64(m), n, 0), got))
				require.Empty(t, transporttest.Diff(got, transporttest.Pattern(n, uint64(m))))
			}
		})
	}
}
