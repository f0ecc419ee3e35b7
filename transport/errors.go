package transport

import (
	"errors"
	"fmt"
)

// Sentinel errors, compared with errors.Is. Every package wraps them with its own context.
var (
	// ErrNotSupported: the transport, library, device or feature is absent here.
	ErrNotSupported = errors.New("not supported")
	// ErrClosed: the communicator, endpoint or link was closed or aborted.
	ErrClosed = errors.New("closed")
	// ErrInvalid: the caller passed a bad argument (size, root, dtype, name ...).
	ErrInvalid = errors.New("invalid argument")
	// ErrMismatch: ranks disagree about the collective they are running.
	ErrMismatch = errors.New("collective mismatch")
	// ErrPeer: a peer died, closed its link or reported a failure.
	ErrPeer = errors.New("peer failure")
	// ErrTimeout: a blocking call ran past its deadline.
	ErrTimeout = errors.New("timeout")
	// ErrAuth: a peer or client failed authentication.
	ErrAuth = errors.New("authentication failed")
	// ErrProtocol: a malformed frame or handshake arrived.
	ErrProtocol = errors.New("protocol error")
)

// MismatchError says what this rank expected and what a peer sent for the same position
// in the message stream.
type MismatchError struct {
	Rank, Peer int    // this rank and the sending peer
	Want, Got  Header // the header this rank expected and the one that arrived
	WantLen    int    // the payload length this rank expected
	GotLen     int    // the payload length that arrived
}

func (e *MismatchError) Error() string {
	if e.Want.Seq == e.Got.Seq && e.Want.Fp == e.Got.Fp && e.Want.Tag == e.Got.Tag {
		return fmt.Sprintf("collective mismatch: rank %d expected %d bytes for %s but rank %d sent %d bytes",
			e.Rank, e.WantLen, e.Want, e.Peer, e.GotLen)
	}
	return fmt.Sprintf("collective mismatch: rank %d is in %s but rank %d sent %s", e.Rank, e.Want, e.Peer, e.Got)
}

// Unwrap makes errors.Is(err, ErrMismatch) true.
func (e *MismatchError) Unwrap() error { return ErrMismatch }

// PeerError names the peer that failed and how.
type PeerError struct {
	Peer int    // the failed rank
	Host string // its host, when known
	Err  error  // the underlying cause
}

func (e *PeerError) Error() string {
	if e.Host != "" {
		return fmt.Sprintf("peer rank %d on %s: %v", e.Peer, e.Host, e.Err)
	}
	return fmt.Sprintf("peer rank %d: %v", e.Peer, e.Err)
}

// Unwrap returns both ErrPeer and the cause, so errors.Is matches either.
func (e *PeerError) Unwrap() []error { return []error{ErrPeer, e.Err} }
