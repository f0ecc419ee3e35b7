package tcp

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// tryPair is two ends of one link over k real loopback sockets.
func tryPair(t *testing.T, k int) (a, b *conn) {
	t.Helper()
	x, y := socketPairs(t, k)
	a, err := newConn(0, transport.PeerInfo{Rank: 1, Host: "localhost"}, x, 256<<10, 50*time.Microsecond)
	require.NoError(t, err)
	b, err = newConn(1, transport.PeerInfo{Rank: 0, Host: "localhost"}, y, 256<<10, 50*time.Microsecond)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

// TestTrySendFillsTheSocket: TrySends of sizes up to 16 KiB into a link nobody reads
// go until the socket is full, and then are refused with nothing sent; at least one
// on the way is taken in part, its rest written by the tail goroutine. Every message
// that was reported sent then arrives whole and in order, and the link goes on with
// Send and TrySend. Sizes: 0, 1, odd, 16 KiB; each message's bytes are its own
// pattern, so a frame cut or repeated at the tail shows in the values or the headers.
func TestTrySendFillsTheSocket(t *testing.T) {
	a, b := tryPair(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sizes := []int{0, 1, 4099, smallCopy}
	seq := uint64(0)
	var sent []int // the size of each message sent, in order
	for round := 0; a.tails == 0; round++ {
		require.Less(t, round, 20, "no TrySend was taken in part: the tail path went untested")
		refused := 0
		for i := 0; refused < 3; i++ {
			n := sizes[i%len(sizes)]
			ok, err := a.TrySend(transporttest.Header(seq, n, 0), transporttest.Pattern(n, seq))
			require.NoError(t, err)
			if !ok {
				refused++
				continue
			}
			sent = append(sent, n)
			seq++
		}
		// The socket is full: a Send with a short deadline fails with nothing sent, and
		// the link stays usable (it waits behind any tail first).
		short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
		err := a.Send(short, transporttest.Header(seq, 1, 0), []byte{1})
		stop()
		if err == nil {
			sent = append(sent, 1)
			seq++
		} else {
			require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		}
		// Drain everything, in order.
		for m, n := range sent {
			got := make([]byte, n)
			require.NoError(t, b.Recv(ctx, transporttest.Header(uint64(m)+seq-uint64(len(sent)), n, 0), got), "message %d of %d bytes", m, n)
			require.Empty(t, transporttest.Diff(got, transporttest.Pattern(n, uint64(m)+seq-uint64(len(sent)))), "message %d", m)
		}
		sent = sent[:0]
	}
	// A TrySend after the tail went out, and a large Send, both arrive.
	require.Eventually(t, a.tailDone, 10*time.Second, time.Millisecond)
	ok, err := a.TrySend(transporttest.Header(seq, 5, 0), transporttest.Pattern(5, seq))
	require.NoError(t, err)
	require.True(t, ok, "an empty socket takes a 5-byte TrySend")
	n := 1 << 20
	go func() { _ = a.Send(ctx, transporttest.Header(seq+1, n, 0), transporttest.Pattern(n, seq+1)) }()
	got := make([]byte, 5)
	require.NoError(t, b.Recv(ctx, transporttest.Header(seq, 5, 0), got))
	require.Empty(t, transporttest.Diff(got, transporttest.Pattern(5, seq)))
	got = make([]byte, n)
	require.NoError(t, b.Recv(ctx, transporttest.Header(seq+1, n, 0), got))
	require.Empty(t, transporttest.Diff(got, transporttest.Pattern(n, seq+1)))
}

// TestTrySendTailClose: a tail still being written when the link closes ends its
// goroutine, and the link reports ErrClosed.
func TestTrySendTailClose(t *testing.T) {
	before := runtime.NumGoroutine()
	a, _ := tryPair(t, 1)
	for i := 0; a.tails == 0; i++ {
		require.Less(t, i, 100000, "no TrySend was taken in part")
		if _, err := a.TrySend(transporttest.Header(uint64(i), smallCopy, 0), make([]byte, smallCopy)); err != nil {
			t.Fatal(err)
		}
	}
	require.False(t, a.tailDone(), "the tail waits for a peer that does not read")
	require.NoError(t, a.Close())
	require.Eventually(t, a.tailDone, 10*time.Second, time.Millisecond, "the tail's goroutine outlived Close")
	_, err := a.TrySend(transporttest.Header(0, 1, 0), []byte{1})
	require.ErrorIs(t, err, transport.ErrClosed)
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 }, 10*time.Second, time.Millisecond)
}
