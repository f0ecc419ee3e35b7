package goccl

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// TestObservedReserve: the communicator's link wrapper passes transport.Reserver through
// (shm's ring), counts a committed message's bytes as sent, and leaves no "blocked in a
// send" mark behind after Commit or Abort; over a link without it (tcp) ReserveMax is 0
// and Reserve says it is not supported.
func TestObservedReserve(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	comms := shmPair(t)
	r, ok := comms[0].links[1].(transport.Reserver)
	require.True(t, ok)
	require.Positive(t, r.ReserveMax())
	before := comms[0].linkStates[1].sent.Load()
	const n = 100 << 10
	want := transporttest.Pattern(n, 3)
	h := transporttest.Header(1, n, 7)
	first, second, err := r.Reserve(ctx, h, n)
	require.NoError(t, err)
	copy(first, want)
	copy(second, want[len(first):])
	r.Advance(n / 2)
	require.NoError(t, r.Commit(ctx))
	got := make([]byte, n)
	require.NoError(t, comms[1].links[0].Recv(ctx, h, got))
	require.Equal(t, want, got)
	require.Equal(t, before+n, comms[0].linkStates[1].sent.Load(), "bytes counted as sent")
	require.Zero(t, atomic.LoadInt64(&comms[0].linkStates[1].sendSince), "no send left marked as blocked")
	_, _, err = r.Reserve(ctx, h, 8)
	require.NoError(t, err)
	r.Abort()
	require.Zero(t, atomic.LoadInt64(&comms[0].linkStates[1].sendSince), "no send left marked as blocked after Abort")

	tcp, err := InitLocal(ctx, 2, WithTransport("tcp"))
	require.NoError(t, err)
	defer func() {
		for _, c := range tcp {
			c.Close()
		}
	}()
	r, ok = tcp[0].links[1].(transport.Reserver)
	require.True(t, ok, "the wrapper offers Reserver on every link")
	require.Zero(t, r.ReserveMax())
	_, _, err = r.Reserve(ctx, h, 8)
	require.ErrorIs(t, err, transport.ErrNotSupported)
}
