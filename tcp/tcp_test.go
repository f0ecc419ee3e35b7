package tcp_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/tcp"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

var loopback = transport.Params{tcp.ParamAddr: "127.0.0.1:0"}

// TestConformance runs the transport suite over real loopback sockets.
func TestConformance(t *testing.T) {
	transporttest.Run(t, tcp.Transport{}, transporttest.Options{Params: loopback})
}

// TestConformanceAuth runs the suite's link checks with every rank holding a token.
func TestConformanceAuth(t *testing.T) {
	transporttest.Run(t, tcp.Transport{}, transporttest.Options{
		Params: loopback, AuthToken: []byte("conformance-token"), MaxMessage: 4 << 20,
	})
}

// TestStriping moves sizes around the stripe threshold and not divisible by the socket
// count, with Recv and RecvStream, for 1, 2 and 4 sockets per peer.
func TestStriping(t *testing.T) {
	const stripe = 4096
	sizes := []int{0, 1, stripe - 1, stripe, stripe + 1, 3*stripe + 7, 1<<20 + 3, 5<<20 + 1}
	for _, socks := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("sockets=%d", socks), func(t *testing.T) {
			conns := transporttest.Mesh(t, tcp.Transport{}, 2, transporttest.Options{Params: transport.Params{
				tcp.ParamAddr: "127.0.0.1:0", tcp.ParamSockets: strconv.Itoa(socks), tcp.ParamStripeMin: strconv.Itoa(stripe),
			}})
			require.Contains(t, conns[0][1].(transport.Describer).Describe(), fmt.Sprintf("%d sockets", socks))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i, n := range sizes {
				want := transporttest.Pattern(n, uint64(socks*100+i))
				h := transporttest.Header(uint64(i), n, 0)
				require.NoError(t, transporttest.SendRecv(ctx, conns[0][1], conns[1][0], h, want), "size %d", n)
				// The same size streamed back, reassembled from its pieces.
				errc := make(chan error, 1)
				go func() { errc <- conns[1][0].Send(ctx, h, want) }()
				got := make([]byte, n)
				covered := 0
				err := conns[0][1].(transport.Streamer).RecvStream(ctx, h, n, func(off int, p []byte) error {
					covered += len(p)
					copy(got[off:], p)
					return nil
				})
				require.NoError(t, err, "stream size %d", n)
				require.NoError(t, <-errc)
				require.Equal(t, n, covered)
				require.Empty(t, transporttest.Diff(got, want), "stream size %d", n)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		key, val string
		ok       bool
	}{
		{tcp.ParamSockets, "4", true},
		{tcp.ParamSockets, "0", false},
		{tcp.ParamSockets, "65", false},
		{tcp.ParamSockets, "two", false},
		{tcp.ParamBufSize, "0", true},
		{tcp.ParamBufSize, "8M", true}, // byte counts take the suffixes shm's do
		{tcp.ParamBufSize, "4MiB", true},
		{tcp.ParamBufSize, "-1", false},
		{tcp.ParamBufSize, "2G", false}, // above the 1 GiB limit
		{tcp.ParamStripeMin, "100", false},
		{tcp.ParamStripeMin, "256K", true},
		{tcp.ParamStripeMin, "4x", false},
		{tcp.ParamAddr, "nonsense", false},
		{tcp.ParamAddr, "127.0.0.1:0", true},
		{tcp.ParamHandshakeTimeout, "1s", true},
		{tcp.ParamHandshakeTimeout, "soon", false},
		{tcp.ParamSpin, "0s", true},
		{tcp.ParamSpin, "50us", true},
		{tcp.ParamSpin, "-1us", false},
		{tcp.ParamSpin, "1h", false},
		{tcp.ParamSpin, "fast", false},
		{tcp.ParamCongestion, "cubic", true},
		{tcp.ParamCongestion, "system", true},
		{tcp.ParamCongestion, "", false},
		{tcp.ParamCongestion, "cubic;rm", false},
		{tcp.ParamSockets, " 4 ", true}, // spaces around a value, as in GOCCL_PARAMS="tcp.sockets= 4"
	} {
		t.Run(tc.key+"="+tc.val, func(t *testing.T) {
			o, err := tcp.ParseOptions(transport.Params{tc.key: tc.val})
			if tc.ok {
				require.NoError(t, err)
				if tc.key == tcp.ParamBufSize && tc.val == "8M" {
					require.Equal(t, 8<<20, o.BufSize)
				}
				return
			}
			require.ErrorIs(t, err, transport.ErrInvalid)
			require.Contains(t, err.Error(), tc.key)
			require.Contains(t, err.Error(), tc.val)
		})
	}
	// A misspelt key is an error that lists the valid ones, not a silent default.
	for _, key := range []string{"tcp.socket", "tcp.", "tcp.SOCKETS"} {
		_, err := tcp.ParseOptions(transport.Params{key: "4"})
		require.ErrorIs(t, err, transport.ErrInvalid, key)
		require.Contains(t, err.Error(), fmt.Sprintf("unknown parameter %q (valid: tcp.addr, tcp.sockets,", key))
	}
}

// TestPeerError checks that a lost peer is named: rank, host, and ErrPeer.
func TestPeerError(t *testing.T) {
	conns := transporttest.Mesh(t, tcp.Transport{}, 3, transporttest.Options{Params: loopback})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, conns[2][0].Close())
	err := conns[0][2].Recv(ctx, transporttest.Header(0, 8, 0), make([]byte, 8))
	require.ErrorIs(t, err, transport.ErrPeer)
	var pe *transport.PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 2, pe.Peer)
	require.Equal(t, "localhost", pe.Host)
	// The link stays broken, with the same cause.
	err = conns[0][2].Send(ctx, transporttest.Header(1, 1, 0), []byte{1})
	require.ErrorIs(t, err, transport.ErrPeer)
	// Other links are unaffected.
	require.NoError(t, transporttest.SendRecv(ctx, conns[0][1], conns[1][0], transporttest.Header(0, 4, 0), []byte("live")))
}

// TestNoLeaks opens, uses and closes a mesh, and checks that no goroutine survives.
func TestNoLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("mesh", func(t *testing.T) {
		conns := transporttest.Mesh(t, tcp.Transport{}, 3, transporttest.Options{Params: loopback})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n := 1 << 20
		require.NoError(t, transporttest.SendRecv(ctx, conns[0][2], conns[2][0], transporttest.Header(0, n, 0), transporttest.Pattern(n, 1)))
	})
	ok := false
	for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ok = runtime.NumGoroutine() <= before
	}
	if !ok {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}

// TestAwaitEndpointClose: a rank waiting for a peer that never dials gets ErrClosed
// when its endpoint closes.
func TestAwaitEndpointClose(t *testing.T) {
	eps, infos := transporttest.Open(t, tcp.Transport{}, 2, transporttest.Options{Params: loopback})
	errc := make(chan error, 1)
	go func() {
		_, err := eps[1].Connect(context.Background(), infos[0])
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, eps[1].Close())
	require.ErrorIs(t, <-errc, transport.ErrClosed)
}

// TestDialUnreachable: a dead address ends in an error within the timeout, not a hang.
func TestDialUnreachable(t *testing.T) {
	eps, _ := transporttest.Open(t, tcp.Transport{}, 2, transporttest.Options{Params: loopback})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = eps[0].Connect(ctx, transport.PeerInfo{Rank: 1, Host: "localhost", Handle: []byte(dead)})
	require.ErrorIs(t, err, transport.ErrTimeout)
	require.Contains(t, err.Error(), dead)
}
