// Package rdma is goccl's RDMA transport ("rdma"): InfiniBand or RoCE through
// libibverbs, the way NCCL's IB net moves data between nodes, plus a software provider
// that runs the same protocol between processes on one host.
//
// Each link to a peer has, per direction, QPsPerPeer reliable-connected queue pairs and a
// ring of Credits receive slots of ChunkBytes each. The receiver advertises every free
// slot with a CTS entry that it RDMA-writes (with immediate) into the sender's FIFO, as
// NCCL's ctsFifo does; the sender takes entries in order, copies a chunk of the framed
// message into a registered staging slot and RDMA-WRITEs it WITH IMMEDIATE into the
// advertised slot, striping chunks over the QPs with up to Credits writes outstanding.
// A sender therefore never writes more than the receiver has room for. The receiver
// checks the frame header against what it expects (a *transport.MismatchError
// otherwise), hands the payload out straight from the slot (Streamer) and advertises the
// slot again. Connection data (QP number, LID, GID, PSN, MTU, FIFO address and rkey) goes
// through the rendezvous store; QPs move INIT→RTR→RTS with NCCL's timeout 20, retry count
// 7 and RNR retry 7. With an auth token each side proves it holds it with an HMAC over
// the communicator id, both ranks and the other side's nonce.
//
// Failure handling: a completion with an error status becomes a *transport.PeerError
// naming the peer and the verbs status ("transport retry counter exceeded (12)"). A side
// that has waited 200 ms without progress posts a zero-length RDMA WRITE to the peer;
// against a dead peer it fails (on hardware after the retry timeout, in the software
// provider at once), so a dead peer is an error, not a hang. Close sends a close notice
// each way once its own writes have completed. A Send or Recv cut off by its context
// after part of a message moved leaves the link unusable, and says so.
//
// Settings (transport.Params): rdma.provider = auto | verbs | soft (auto, the default,
// is verbs and never falls back to the emulation by itself); rdma.hca = an NCCL_IB_HCA
// list ("mlx5_0:1,mlx5_1", "^mlx5_2", "=mlx5_0"); rdma.gid_index (-1 picks a RoCE v2
// IPv4-mapped GID); rdma.qps_per_peer (1); rdma.chunk_bytes (256 KiB); rdma.credits (8).
// Open returns an error wrapping transport.ErrNotSupported when the provider cannot run
// here (no cgo, no libibverbs, a kernel without RDMA — ibv_get_device_list fails with
// ENOSYS —, no active port passing the HCA list), so "auto" in a communicator falls back.
//
// What is verified where:
//   - The protocol engine (handshake, CTS FIFO, credits, chunking, several QPs,
//     mismatches, close, cancellation, auth, a peer dying mid-transfer) runs in CI on the
//     software provider, between goroutine ranks (transporttest conformance suite) and
//     between real processes (TestTwoProcesses, TestPeerDies*).
//   - The verbs ABI (struct sizes, field offsets, enum values, attribute masks the
//     provider declares itself) is checked against the installed rdma-core headers
//     (package internal/verbs/abicheck; skipped with a message without libibverbs-dev).
//   - The loader runs against the real libibverbs.so.1 where it is installed: missing
//     library, missing device (ENOSYS), status strings compared with ibv_wc_status_str.
//   - Opening a device, creating QPs and moving data through verbs runs only where an RDMA
//     device exists; it has not been run on hardware in this repository's CI.
//
// Discover lists the host's devices through github.com/Mellanox/rdmamap and sysfs for
// `goccl info`; it is empty, not an error, on a host without RDMA.
//
//	import _ "github.com/goccl/goccl/rdma" // registers "rdma"
//	cfg.Transports = []string{"rdma", "tcp"}
//	cfg.Params = map[string]string{"rdma.hca": "mlx5_0:1"}
package rdma
