package rdma

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

func TestSoftPingPongSizes(t *testing.T) {
	for _, qps := range []string{"1", "3"} {
		t.Run("qps="+qps, func(t *testing.T) {
			a, b := pair(t, softParams(ParamQPsPerPeer, qps))
			ctx := ctxT(t, 30*time.Second)
			for i, n := range sizes(4096) {
				want := pattern(n, int64(i))
				var wg sync.WaitGroup
				wg.Add(1)
				var serr error
				go func() { defer wg.Done(); serr = a.Send(ctx, hdr(uint64(i), n), want) }()
				got := make([]byte, n)
				require.NoError(t, b.Recv(ctx, hdr(uint64(i), n), got), "size %d", n)
				wg.Wait()
				require.NoError(t, serr)
				require.Equal(t, want, got, "size %d", n)
				// and back
				wg.Add(1)
				go func() { defer wg.Done(); serr = b.Send(ctx, hdr(uint64(i), n), got) }()
				back := make([]byte, n)
				require.NoError(t, a.Recv(ctx, hdr(uint64(i), n), back))
				wg.Wait()
				require.NoError(t, serr)
				require.Equal(t, want, back)
			}
		})
	}
}

// TestCreditExhaustionAndRecovery: with 2 slots, a third message cannot be sent until
// the receiver frees a slot; the blocked Send fails at its deadline without damaging the
// link (nothing of it was written), and after the receiver drains, traffic resumes.
func TestCreditExhaustionAndRecovery(t *testing.T) {
	a, b := pair(t, softParams(ParamCredits, "2"))
	ctx := ctxT(t, 30*time.Second)
	msgs := [][]byte{pattern(100, 1), pattern(4000, 2), pattern(5, 3)}
	require.NoError(t, a.Send(ctx, hdr(0, 100), msgs[0]))
	require.NoError(t, a.Send(ctx, hdr(1, 4000), msgs[1]))
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := a.Send(short, hdr(2, 5), msgs[2])
	cancel()
	require.ErrorIs(t, err, transport.ErrTimeout, "a third message fit into two slots")
	for i := 0; i < 2; i++ {
		got := make([]byte, len(msgs[i]))
		require.NoError(t, b.Recv(ctx, hdr(uint64(i), len(got)), got))
		require.Equal(t, msgs[i], got)
	}
	require.NoError(t, a.Send(ctx, hdr(2, 5), msgs[2]))
	got := make([]byte, 5)
	require.NoError(t, b.Recv(ctx, hdr(2, 5), got))
	require.Equal(t, msgs[2], got)
}

// TestInterruptedSendBreaksLink: a message cut off after its first chunk leaves the
// stream unrecoverable, so the link reports that instead of sending garbage later.
func TestInterruptedSendBreaksLink(t *testing.T) {
	a, _ := pair(t, softParams(ParamCredits, "2"))
	ctx := ctxT(t, 30*time.Second)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err := a.Send(short, hdr(0, 20000), make([]byte, 20000)) // needs 5 slots of 4 KiB
	require.ErrorIs(t, err, transport.ErrTimeout)
	err = a.Send(ctx, hdr(1, 1), []byte{1})
	require.Error(t, err)
	require.Contains(t, err.Error(), "interrupted after")
}

// TestMismatchNamesBothSides: a receiver expecting another collective gets a
// MismatchError describing both, and the link stays broken afterwards.
func TestMismatchNamesBothSides(t *testing.T) {
	a, b := pair(t, softParams())
	ctx := ctxT(t, 30*time.Second)
	require.NoError(t, a.Send(ctx, hdr(5, 8), make([]byte, 8)))
	err := b.Recv(ctx, hdr(5, 16), make([]byte, 16))
	var me *transport.MismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, 1, me.Rank)
	require.Equal(t, 0, me.Peer)
	require.Equal(t, 8, me.GotLen)
	require.Equal(t, 16, me.WantLen)
	require.ErrorIs(t, b.Recv(ctx, hdr(6, 1), make([]byte, 1)), transport.ErrMismatch)
}

// TestCloseAfterDeliveryIsNoSendFailure: the peer takes a message and closes (as a rank
// that calls Abort right after its last call does) while the sender has yet to look at
// its completions. The send delivered everything, so it succeeds; the next one sees
// the close. A close with a write still outstanding fails the send. (Found by
// TestRandomCancel: a rank's call before the peer's Abort failed with "link closed by
// peer while sending".)
func TestCloseAfterDeliveryIsNoSendFailure(t *testing.T) {
	a, b := pair(t, softParams())
	ctx := ctxT(t, 30*time.Second)
	msg := pattern(100, 3)
	// What Send does up to its last step: the message goes out whole...
	require.NoError(t, a.Send(ctx, hdr(0, 100), msg))
	got := make([]byte, 100)
	require.NoError(t, b.Recv(ctx, hdr(0, 100), got))
	require.Equal(t, msg, got)
	require.NoError(t, b.Close())
	// ...and the close notice is in the CQ when settle first polls.
	s := &a.(*conn).tx
	s.mu.Lock()
	err := s.settle()
	s.mu.Unlock()
	require.NoError(t, err, "every write had completed: the peer has the message")
	err = a.Send(ctx, hdr(1, 1), []byte{1})
	require.ErrorIs(t, err, transport.ErrClosed, "the next send sees the close")

	a, b = pair(t, softParams())
	s = &a.(*conn).tx
	require.NoError(t, b.Close())
	s.mu.Lock()
	s.busy[0] = true // a write not yet completed when the close came
	err = s.settle()
	s.busy[0] = false
	s.mu.Unlock()
	require.ErrorIs(t, err, transport.ErrClosed)
	require.Contains(t, err.Error(), "link closed by peer while sending")
}
