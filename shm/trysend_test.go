//go:build linux

package shm

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// TrySend (transport.TrySender): a message of at most one record goes at once and
// arrives as Send's would; a larger one, one that finds the ring full, and one that
// finds another Send inside the link are not sent (and the link stays usable); a
// closed link refuses it with an error.
func TestTrySend(t *testing.T) {
	ctx := ctxT(t)
	a, b, _ := pair(t, transport.Params{"shm.ring_bytes": "64K", "shm.spin": "0"})
	var ts transport.TrySender = a

	for i, n := range []int{0, 1, 7, inlineMax} {
		h := transporttest.Header(uint64(i), n, 3)
		p := transporttest.Pattern(n, uint64(i))
		sent, err := ts.TrySend(h, p)
		require.NoError(t, err)
		require.True(t, sent, "%d bytes", n)
		ts.Flush()
		got := make([]byte, n)
		require.NoError(t, b.Recv(ctx, h, got))
		require.Equal(t, p, got)
	}

	sent, err := ts.TrySend(transporttest.Header(9, inlineMax+1, 0), make([]byte, inlineMax+1))
	require.NoError(t, err)
	require.False(t, sent, "a message larger than a record")

	// Fill the 64 KiB ring: 1024 records, then no room.
	h := transporttest.Header(10, 8, 0)
	for i := range (64 << 10) / recordBytes {
		sent, err := ts.TrySend(h, transporttest.Pattern(8, uint64(i)))
		require.NoError(t, err)
		require.True(t, sent, "record %d of an empty ring", i)
	}
	sent, err = ts.TrySend(h, make([]byte, 8))
	require.NoError(t, err)
	require.False(t, sent, "a full ring")
	ts.Flush()

	// A Send blocked on the full ring is inside the link: TrySend leaves it alone. (Not
	// the other way round: a Send that starts while a TrySend is inside reports
	// concurrent Sends, so the test waits for the Send to be inside before it tries.)
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, a.Send(ctx, h, transporttest.Pattern(8, 99))) })
	require.Eventually(t, func() bool { return isSending(a) }, 5*time.Second, time.Millisecond)
	sent, err = ts.TrySend(h, make([]byte, 8))
	require.NoError(t, err)
	require.False(t, sent, "a Send is inside the link")
	got := make([]byte, 8)
	for i := range (64 << 10) / recordBytes {
		require.NoError(t, b.Recv(ctx, h, got))
		require.Equal(t, transporttest.Pattern(8, uint64(i)), got, "record %d", i)
	}
	wg.Wait()
	require.NoError(t, b.Recv(ctx, h, got))
	require.Equal(t, transporttest.Pattern(8, 99), got)

	require.NoError(t, a.Close())
	_, err = ts.TrySend(h, got)
	require.ErrorIs(t, err, transport.ErrClosed)
	ts.Flush() // after Close: nothing to touch, and no crash
}

func isSending(c *conn) bool { return atomic.LoadInt32(&c.sending) != 0 }

// A receiver asleep on the ring (no spinning) is woken by Flush, not by TrySend: the
// wake-up (a bump of the ring's dataSeq) comes only once the stamp is fenced. Its
// liveness check would find the message anyway within 5 ms, so the test watches the
// wake-up itself.
func TestTrySendFlushWakesASleeper(t *testing.T) {
	ctx := ctxT(t)
	a, b, _ := pair(t, transport.Params{"shm.spin": "0"})
	for i := range 20 {
		h := transporttest.Header(uint64(i), 8, 0)
		done := make(chan error, 1)
		got := make([]byte, 8)
		go func() { done <- b.Recv(ctx, h, got) }()
		require.Eventually(t, func() bool { return atomic.LoadUint32(a.out.consWaiting) != 0 },
			5*time.Second, 10*time.Microsecond, "the receiver never went to sleep")
		seq := atomic.LoadUint32(a.out.dataSeq)
		sent, err := a.TrySend(h, transporttest.Pattern(8, uint64(i)))
		require.NoError(t, err)
		require.True(t, sent)
		require.Equal(t, seq, atomic.LoadUint32(a.out.dataSeq), "TrySend woke the receiver itself")
		a.Flush()
		require.NotEqual(t, seq, atomic.LoadUint32(a.out.dataSeq), "Flush did not wake the receiver")
		require.NoError(t, <-done)
		require.Equal(t, transporttest.Pattern(8, uint64(i)), got)
	}
}
