package inmem

import (
	"context"
	"fmt"
	"sync"

	"github.com/goccl/goccl/transport"
)

// Name is the registry name of this transport.
const Name = "inmem"

func init() { transport.Register(Transport{}) }

// Transport is the in-process transport. The zero value is ready to use.
type Transport struct{}

// Name returns "inmem".
func (Transport) Name() string { return Name }

// ParamPrefixes: inmem owns the "inmem." keys (transport.ParamChecker).
func (Transport) ParamPrefixes() []string { return []string{Name + "."} }

// CheckParams refuses every "inmem." key: the in-process transport has no settings.
func (Transport) CheckParams(p transport.Params) error {
	if k := transport.UnknownParam(p, Name+".", nil); k != "" {
		return fmt.Errorf("inmem: %w: unknown parameter %q: the in-process transport has no settings", transport.ErrInvalid, k)
	}
	return nil
}

// Open returns this rank's endpoint.
func (Transport) Open(_ context.Context, l transport.Local) (transport.Endpoint, error) {
	if l.Rank < 0 || l.Rank >= l.World {
		return nil, fmt.Errorf("inmem: %w: rank %d outside world of %d", transport.ErrInvalid, l.Rank, l.World)
	}
	return &endpoint{local: l, token: fmt.Sprintf("%s/%d", l.CommID, l.Rank)}, nil
}

type endpoint struct {
	local transport.Local
	token string
}

// Handle is the process-local name of the endpoint; it only means something here.
func (e *endpoint) Handle() []byte { return []byte(processID + "/" + e.token) }

func (e *endpoint) CanConnect(p transport.PeerInfo) error {
	want := fmt.Sprintf("%s/%s/%d", processID, e.local.CommID, p.Rank)
	if string(p.Handle) != want {
		return fmt.Errorf("inmem: rank %d is not in this process (handle %q)", p.Rank, p.Handle)
	}
	return nil
}

func (e *endpoint) Connect(ctx context.Context, p transport.PeerInfo) (transport.Conn, error) {
	if err := e.CanConnect(p); err != nil {
		return nil, err
	}
	if p.Rank == e.local.Rank {
		return nil, fmt.Errorf("inmem: %w: rank %d cannot link to itself", transport.ErrInvalid, p.Rank)
	}
	pr := hub.pair(e.local.CommID, e.local.Rank, p.Rank)
	return pr.end(e.local.Rank, p.Rank), nil
}

func (e *endpoint) Close() error { return nil }

// processID distinguishes handles of different processes that reuse a communicator id.
var processID = fmt.Sprintf("pid%d", pidOf())

type pairKey struct {
	comm   string
	lo, hi int
}

type pairHub struct {
	mu    sync.Mutex
	pairs map[pairKey]*pair
}

var hub = &pairHub{pairs: map[pairKey]*pair{}}

func (h *pairHub) pair(comm string, a, b int) *pair {
	k := pairKey{comm, min(a, b), max(a, b)}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pairs[k]
	if !ok {
		p = newPair(k)
		h.pairs[k] = p
	}
	return p
}

func (h *pairHub) release(k pairKey) {
	h.mu.Lock()
	delete(h.pairs, k)
	h.mu.Unlock()
}
