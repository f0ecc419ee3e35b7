// Package ring implements the ring algorithms: rank r sends only to r+1 and receives
// only from r-1, so every link carries the same load and the algorithm is
// bandwidth-optimal for large messages.
//
//   - AllReduce is a reduce-scatter (W-1 steps: each rank ends up owning one fully
//     reduced segment) followed by an all-gather (W-1 steps: the segments travel round),
//     2(W-1)/W of the buffer on each link.
//   - ReduceScatter and AllGather are those two halves on their own.
//   - Broadcast and Reduce are a chain around the ring (root first, or root last).
//
// Everything is cut into chunks (Args.ChunkBytes, default algos.DefaultChunkBytes) and
// pipelined: a sender goroutine and a receiver goroutine run side by side, and the sender
// forwards chunk i of a step as soon as the receiver has reduced it, while chunk i+1 is
// still arriving. When the link implements transport.Streamer, received pieces are
// reduced straight off the link. Other collectives (Gather, Scatter, AllToAll, Barrier,
// SendRecv) fall back to naive through algos.Resolve.
//
//	import _ "github.com/goccl/goccl/algos/ring" // registers "ring"
package ring
