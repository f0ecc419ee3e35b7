package shm

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/goccl/goccl/transport"
)

// Name is the registry name of this transport.
const Name = "shm"

func init() { transport.Register(Transport{}) }

// Transport is the shared-memory transport. The zero value is ready to use; settings
// come from the "shm.*" keys of transport.Local.Params (see ParseOptions).
type Transport struct{}

// Name returns "shm".
func (Transport) Name() string { return Name }

// ParamPrefixes: shm reads the "shm." keys (transport.ParamChecker).
func (Transport) ParamPrefixes() []string { return []string{Name + "."} }

// CheckParams reports what ParseOptions would refuse.
func (Transport) CheckParams(p transport.Params) error {
	_, err := ParseOptions(p)
	return err
}

// Open checks the rank and the parameters and returns this rank's endpoint. Opening
// creates nothing in the segment directory; segments appear per link in Connect.
// Where shared memory cannot work (not Linux) the error wraps transport.ErrNotSupported.
func (Transport) Open(ctx context.Context, l transport.Local) (transport.Endpoint, error) {
	if l.World < 1 || l.Rank < 0 || l.Rank >= l.World {
		return nil, fmt.Errorf("shm: %w: rank %d outside a world of %d (want 0 <= rank < world)",
			transport.ErrInvalid, l.Rank, l.World)
	}
	if l.Store == nil {
		return nil, fmt.Errorf("shm: %w: rank %d has no rendezvous store (Local.Store is nil)", transport.ErrInvalid, l.Rank)
	}
	o, err := ParseOptions(l.Params)
	if err != nil {
		return nil, err
	}
	return openEndpoint(ctx, l, o)
}

// handleVersion is bumped when the handle or the segment layout changes incompatibly.
const handleVersion = 1

// handle is what an endpoint publishes: enough for a peer to decide whether it shares
// this machine's memory (CanConnect) and to watch this process (pid).
type handle struct {
	Magic   string `json:"shm"`  // always "goccl-shm", so foreign handles are rejected
	Version int    `json:"v"`    // handleVersion
	Pid     int    `json:"pid"`  // the endpoint's process
	UID     int    `json:"uid"`  // segments are created mode 0600
	Machine string `json:"node"` // boot id, segment dir device and pid namespace
}

const handleMagic = "goccl-shm"

func (h handle) encode() []byte {
	b, _ := json.Marshal(h)
	return b
}

func decodeHandle(b []byte) (handle, error) {
	var h handle
	if err := json.Unmarshal(b, &h); err != nil || h.Magic != handleMagic {
		return handle{}, fmt.Errorf("%w: not an shm handle (%d bytes)", transport.ErrProtocol, len(b))
	}
	if h.Version != handleVersion {
		return handle{}, fmt.Errorf("%w: shm handle version %d, this build speaks %d (mixed goccl versions)",
			transport.ErrProtocol, h.Version, handleVersion)
	}
	if h.Pid <= 0 {
		return handle{}, fmt.Errorf("%w: shm handle has pid %d", transport.ErrProtocol, h.Pid)
	}
	return h, nil
}

// canConnect is the rule behind Endpoint.CanConnect, kept free of system calls so both
// sides of a pair evaluate the same symmetric comparisons: same host identity from the
// rendezvous, then the same user and the same kernel, /dev/shm and pid namespace (two
// containers can share a host name and still not share memory or pids).
func canConnect(self int, selfHost string, me handle, peer transport.PeerInfo) error {
	if selfHost == "" || peer.Host == "" {
		return fmt.Errorf("shm: %w: rank %d or rank %d has no host identity from the rendezvous",
			transport.ErrNotSupported, self, peer.Rank)
	}
	if peer.Host != selfHost {
		return fmt.Errorf("shm: %w: rank %d is on host %q and rank %d on %q: shared memory needs one host",
			transport.ErrNotSupported, peer.Rank, peer.Host, self, selfHost)
	}
	h, err := decodeHandle(peer.Handle)
	if err != nil {
		return fmt.Errorf("shm: rank %d: %w", peer.Rank, err)
	}
	if h.UID != me.UID {
		return fmt.Errorf("shm: %w: rank %d runs as uid %d and rank %d as uid %d: segments are private to one user",
			transport.ErrNotSupported, peer.Rank, h.UID, self, me.UID)
	}
	if h.Machine != me.Machine {
		return fmt.Errorf("shm: %w: rank %d (%s) and rank %d (%s) share the host name %q but not the kernel, segment directory or pid namespace",
			transport.ErrNotSupported, peer.Rank, h.Machine, self, me.Machine, selfHost)
	}
	return nil
}
