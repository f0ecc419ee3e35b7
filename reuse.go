package goccl

import "sync/atomic"

// descHome keeps one spare description of a blocking call (a batchCall, an
// allToAllV) for the next such call, so that a BatchSendRecv of up to batchInline ops
// or an AllToAllV of up to a2avInline ranks allocates nothing in the steady state
// (BENCHMARKS.md, "Speed", 42a).
//
// A description from a home has two holders: the call, until it returns, and the
// call's flight record, until a later operation's record overwrites it
// (flight.queued). Each lets go with release; the last one hands it back. A call that
// never reaches the flight recorder (a closed communicator) keeps it from coming back,
// and the collector takes it. Descriptions of queued calls (BatchSendRecvAsync,
// AllToAllVAsync) have no home: their Work belongs to the caller and may outlive the
// record.
type descHome[T any] struct {
	spare atomic.Pointer[T]
}

// take returns the spare, or a new T, and whether it is new.
func (h *descHome[T]) take() (d *T, fresh bool) {
	if d = h.spare.Swap(nil); d != nil {
		return d, false
	}
	return new(T), true
}

// holders is a homed description's count of holders (descHome).
type holders struct {
	n atomic.Int32
}

// hold starts a homed description's life in a call: the call and its record.
func (h *holders) hold() { h.n.Store(2) }

// drop lets one holder go and reports whether it was the last.
func (h *holders) drop() bool { return h.n.Add(-1) == 0 }

// released is a description that goes back to its home once its holders let go.
type released interface {
	release()
}
