//go:build linux

package shm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// TestReserveStreamsBehindAdvance: with part of a reserved message advanced, the peer's
// RecvStream gets those bytes before Commit (it runs behind the writer), and the rest
// after; a reservation that is aborted after an Advance fails the link at both ends,
// the receiver in the middle of the message included, instead of leaving it waiting.
func TestReserveStreamsBehindAdvance(t *testing.T) {
	ctx := ctxT(t)
	a, b, _ := pair(t, transport.Params{"shm.ring_bytes": "1M", "shm.chunk_bytes": "16K", "shm.spin": "0"})
	const n = 100 << 10
	want := transporttest.Pattern(n, 7)
	h := transporttest.Header(1, n, 5)
	first, second, err := a.Reserve(ctx, h, n)
	require.NoError(t, err)
	require.Empty(t, second, "an empty ring's room does not wrap")
	copy(first, want)
	a.Advance(40 << 10)
	got := make([]byte, n)
	seen := make(chan int, 64)
	done := make(chan error, 1)
	go func() {
		done <- b.RecvStream(ctx, h, n, func(off int, p []byte) error {
			copy(got[off:], p)
			seen <- off + len(p)
			return nil
		})
	}()
	for upTo := 0; upTo < 40<<10; { // before Commit, the advanced bytes arrive
		select {
		case upTo = <-seen:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of the 40 KiB advanced reached the receiver before Commit", upTo)
		}
	}
	require.NoError(t, a.Commit(ctx))
	require.NoError(t, <-done)
	require.Equal(t, want, got)

	// Aborted after an Advance: the receiver has part of a message that will not end.
	first, _, err = a.Reserve(ctx, h, n)
	require.NoError(t, err)
	copy(first, want)
	a.Advance(32 << 10)
	go func() { done <- b.Recv(ctx, h, make([]byte, n)) }()
	a.Abort()
	require.Error(t, <-done, "the receiver of a dropped message")
	require.Error(t, a.Send(ctx, h, want), "the link failed")
}
