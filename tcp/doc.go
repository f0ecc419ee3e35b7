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
// and payloads of at least tcp.stripe_min bytes (default 1 MiB) are cut into one
// contiguous part per socket (cut on 64-byte boundaries), which the calling goroutine
// moves itself, straight from and into the caller's buffers: it writes or reads
// whichever sockets are ready without blocking and parks on the netpoller only when
// none is, so a large message costs no goroutine hand-offs. A message of at most 16 KiB
// may also go with TrySend (transport.TrySender): one non-blocking write, or nothing
// when the socket has no room, so goccl's fast paths and batches send it from the
// caller; when the socket takes only part of it, a goroutine writes the rest and the
// link's next send waits for it, the only goroutine a link ever starts. The receiver
// checks each header against what it expects, so ranks that disagree get a
// *transport.MismatchError, not garbage. Links report how much they
// buffer without the receiver (transport.Eager: a quarter of the send buffer).
//
// Failures are final for a link: a cancelled context (it sets a past deadline on the
// sockets), a mismatch, or a lost peer (EOF, reset: a *transport.PeerError wrapping
// transport.ErrPeer) breaks it, closes its sockets so the peer notices at once, and
// every later call returns that error.
//
//	import _ "github.com/goccl/goccl/tcp" // registers "tcp"
//
// Settings (transport.Params): tcp.addr, tcp.sockets, tcp.bufsize, tcp.stripe_min,
// tcp.handshake_timeout, tcp.spin, tcp.congestion; see the Param constants. A receive
// of a message below tcp.stripe_min polls its socket for tcp.spin (500 µs, yielding
// the CPU between polls) before it parks on the netpoller, since a parked goroutine's
// wake-up costs more than such a message's flight; its context is armed only if it
// parks. Those
// polls, and writes of at most 64 KiB, are raw system calls: a non-blocking call has
// nothing to gain from the runtime's blocking-call bookkeeping, which cost a quarter of
// an 8-byte AllReduce over loopback. Links
// within one host use cubic (or reno) congestion control, chosen before connect: the
// BBR default of some images paces every loopback socket with timers, which costs a
// quarter of the CPU per byte.
package tcp
