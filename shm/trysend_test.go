//go:build linux

package shm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// TrySend (transport.TrySender): a message that goes with its record (up to shortMax
// bytes) goes at once and arrives as Send's would; a larger one, one that finds the ring
// full, and one that finds another Send inside the link are not sent (and the link
// stays usable); a closed link refuses it with an error.
func TestTrySend(t *testing.T) {
	ctx := ctxT(t)
	a, b, _ := pair(t, transport.Params{"shm.ring_bytes": "64K", "shm.spin": "0"})
	var ts transport.TrySender = a

	for i, n := range []int{0, 1, 7, inlineMax, inlineMax + 1, 1000, shortMax} {
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

	sent, err := ts.TrySend(transporttest.Header(9, shortMax+1, 0), make([]byte, shortMax+1))
	require.NoError(t, err)
	require.False(t, sent, "a message larger than a short record")

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

// Messages that go with their record (kindShort: more than inlineMax bytes, up to
// shortMax) arrive whole through Send and TrySend, through Recv and RecvStream, also
// where the ring's end cuts the payload; a larger message goes as a data record.
func TestShortRecords(t *testing.T) {
	ctx := ctxT(t)
	a, b, _ := pair(t, transport.Params{"shm.ring_bytes": "64K"})
	sizes := []int{inlineMax + 1, 63, 64, 65, 100, 1000, shortMax - 1, shortMax, shortMax + 1, 3000, 9000}
	kinds := map[byte]int{}
	cut := 0 // payloads the ring's end cut in two
	for i := range 300 {
		n := sizes[i%len(sizes)]
		h := transporttest.Header(uint64(i), n, 5)
		p := transporttest.Pattern(n, uint64(i))
		tryIt := i%2 == 0 && n <= shortMax
		if tryIt {
			sent, err := a.TrySend(h, p)
			require.NoError(t, err)
			require.True(t, sent, "message %d, %d bytes", i, n)
			a.Flush()
		} else {
			require.NoError(t, a.Send(ctx, h, p), "message %d, %d bytes", i, n)
		}
		kind := byte(atomic.LoadUint64(b.in.stampWord(b.tail)))
		kinds[kind]++
		want := byte(kindShort)
		if n > shortMax {
			want = kindData
		}
		require.Equal(t, want, kind, "message %d, %d bytes (try %v)", i, n, tryIt)
		if start := (b.tail + recordBytes) & b.in.mask; start+uint64(n) > b.in.size {
			cut++
		}
		got := make([]byte, n)
		if i%3 == 0 {
			require.NoError(t, b.Recv(ctx, h, got), "message %d", i)
		} else {
			delivered := 0
			require.NoError(t, b.RecvStream(ctx, h, n, func(off int, q []byte) error {
				if off%recordBytes != 0 || off != delivered {
					return fmt.Errorf("piece at offset %d after %d bytes", off, delivered)
				}
				delivered += copy(got[off:], q)
				return nil
			}), "message %d", i)
			require.Equal(t, n, delivered, "message %d", i)
		}
		require.Empty(t, transporttest.Diff(got, p), "message %d, %d bytes", i, n)
	}
	require.Positive(t, cut, "no short payload crossed the ring's end: the test missed the wrap")
	require.Positive(t, kinds[kindShort])
	require.Positive(t, kinds[kindData])
	require.Equal(t, a.head, b.tail, "the two sides disagree on the stream position")
}
