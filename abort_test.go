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

// The first failure recorded blames rank 4, because rank 5 lost its link to rank 4;
// but rank 4 is alive and failed because rank 6 died (its send to rank 5 was cut
// half-way when its send to rank 6 failed). Rank 4's view replaces the record, and
// ranks that read it afterwards name rank 6; rank 4 keeps its own error.
func TestAgreeCauseFollowsTheBlamedRank(t *testing.T) {
	store := rendezvous.NewMemStore()
	at := func(r int) *Comm { return &Comm{rank: r, size: 8, store: store} }
	_, _, _, ok := at(5).agreeCause(abortPeer, 4, 5)
	require.False(t, ok, "the first view is recorded, not read")
	_, _, _, ok = at(4).agreeCause(abortPeer, 6, 4)
	require.False(t, ok, "the blamed rank keeps its own view")
	code, who, origin, ok := at(0).agreeCause(abortPeer, 5, 0)
	require.True(t, ok)
	require.Equal(t, []any{uint64(abortPeer), 6, 4}, []any{code, who, origin})

	// A rank blamed by the record whose own view blames nobody else keeps the record.
	store = rendezvous.NewMemStore()
	_, _, _, _ = at(5).agreeCause(abortPeer, 4, 5)
	code, who, origin, ok = at(4).agreeCause(abortCancelled, 4, 4)
	require.True(t, ok)
	require.Equal(t, []any{uint64(abortPeer), 4, 5}, []any{code, who, origin})
	_, who, _, _ = at(1).agreeCause(abortPeer, 2, 1)
	require.Equal(t, 4, who)
}
