// Package tcp is goccl's TCP transport: the way ranks talk when nothing faster is
// available, over loopback or a real network.
//
// Each rank listens once (with go-reuseport, so a restarted rank can rebind its port)
// and publishes "ip:port" as its Handle. For each pair the lower rank dials the higher;
// every socket handshakes before any data (magic, version, communicator id, ranks,
// world size, socket index and count), and with an auth token both sides first prove
// they hold it with an HMAC-SHA256 challenge over fresh nonces, so a stranger, a rank of
// another job or a replayed handshake is refused while the listener keeps serving.
//
// A link has tcp.sockets sockets (default 2). Every message is a 40-byte frame header
// (transport.Frame) and its payload; small messages go out with one write on socket 0,
// and payloads of at least tcp.stripe_min bytes (default 256 KiB) are cut into one
// contiguous part per socket, moved at once by long-lived per-socket goroutines
// straight from and into the caller's buffers. The receiver checks each header against
// what it expects, so ranks that disagree get a *transport.MismatchError, not garbage.
//
// Failures are final for a link: a cancelled context (it sets a past deadline on the
// sockets), a mismatch, or a lost peer (EOF, reset: a *transport.PeerError wrapping
// transport.ErrPeer) breaks it, closes its sockets so the peer notices at once, and
// every later call returns that error.
//
//	import _ "github.com/goccl/goccl/tcp" // registers "tcp"
//
// Settings (transport.Params): tcp.addr, tcp.sockets, tcp.bufsize, tcp.stripe_min,
// tcp.handshake_timeout, tcp.spin; see the Param constants. A receive polls its socket
// for tcp.spin (50 µs, yielding the CPU between polls) before it parks on the netpoller,
// since a parked goroutine's wake-up costs more than a small message's flight.
package tcp
