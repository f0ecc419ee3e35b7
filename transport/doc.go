// Package transport is the contract between goccl's communicator and the ways bytes
// move between ranks: the element types and operators, the message header every link
// carries, the Transport/Endpoint/Conn interfaces, the rendezvous Store, and the registry
// of transports by name.
//
// A transport answers three questions: can this rank reach that peer (CanConnect), how
// to establish a link (Connect, which handshakes before any data), and how to move whole
// messages over it (Conn.Send and Conn.Recv). Every message carries a Header: the
// communicator's sequence number, the collective's Fingerprint (kind, dtype, op, count,
// root) and the algorithm's step tag. Conn.Recv checks the header against what the
// receiver expects, so ranks that disagree get a *MismatchError instead of garbage.
//
// Optional abilities are separate interfaces found by type assertion (Streamer,
// Describer), the way database/sql finds optional driver features.
//
// Lifetimes: a Transport is stateless and registered once in init; Open creates an
// Endpoint per rank per communicator; Connect returns one Conn per peer; the communicator
// closes the Conns and then the Endpoint.
//
// Implementations live in sibling packages (tcp, shm, rdma, nccl) and in inmem, an
// in-process transport for goroutine ranks; transporttest is the conformance suite each
// of them runs.
package transport
