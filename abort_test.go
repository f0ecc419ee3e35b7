package goccl

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// TestInitAbortFirstFailureStands: when several ranks fail Init, the first failure is
// the one posted, with its sentinel; a later one (here a dial reset by the rank that gave
// up) neither replaces it nor hides it: the later rank reports both, so errors.Is finds
// the cause (ErrAuth) on every rank. This is the race that let a reset replace an auth
// refusal in e2e's TestAuthLinksRefuse.
func TestInitAbortFirstFailureStands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := rendezvous.NewMemStore()
	first := &Comm{rank: 1, store: store}
	authErr := fmt.Errorf("goccl: rank 1: connect to rank 2: %w: wrong token", transport.ErrAuth)
	require.Same(t, authErr, first.postAbort(ctx, authErr), "the first failure is returned as it is")

	second := &Comm{rank: 0, store: store}
	reset := errors.New("goccl: rank 0: connect to rank 1: connection reset by peer")
	err := second.postAbort(ctx, reset)
	require.ErrorIs(t, err, transport.ErrAuth, "the later rank must report the first failure's sentinel: %v", err)
	require.ErrorIs(t, err, transport.ErrPeer)
	require.ErrorIs(t, err, reset, "and its own failure beside it")
	require.Contains(t, err.Error(), "rank 1")

	msg, gerr := store.Get(ctx, "init/abort")
	require.NoError(t, gerr)
	require.Contains(t, string(msg), "wrong token", "the posted failure must still be the first")
	require.NotContains(t, string(msg), "reset")

	// A rank that had already read the first failure (the cause of its context) keeps
	// its error as initErr built it.
	cctx, ccancel := context.WithCancelCause(ctx)
	ccancel(initAbortErr(msg))
	third := &Comm{rank: 2, store: store}
	seen := fmt.Errorf("goccl: rank 2: init aborted: %w", context.Cause(cctx))
	require.Same(t, seen, third.postAbort(cctx, seen))
}

// A rank that found the user's mistake (ErrInvalid) itself reports it even when a
// peer's abort, a consequence of that mistake, reached it first; an error that is only
// the abort's consequence is not repeated.
func TestInitErrKeepsTheUsersMistake(t *testing.T) {
	c := &Comm{rank: 0}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("goccl: peer failure: rank 1: connect to rank 0: link closed by peer"))
	own := fmt.Errorf("goccl: rank 0: %w: the rdma link to rank 1 takes 4056 bytes without a running receive", transport.ErrInvalid)
	err := c.initErr(ctx, own)
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "takes 4056 bytes")
	require.ErrorContains(t, err, "link closed by peer")

	err = c.initErr(ctx, fmt.Errorf("rdma: link closed by peer while sending: %w", transport.ErrClosed))
	require.NotErrorIs(t, err, transport.ErrInvalid)
	require.NotContains(t, err.Error(), "and on this rank")
}
