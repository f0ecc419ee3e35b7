// Package tree implements the tree algorithms, the latency-optimal choice for small
// messages: about 2 log2(W) steps where the ring needs 2(W-1).
//
//   - AllReduce uses NCCL's double binary tree (algos/internal/shape): the buffer is
//     split in two halves and each half is reduced up one tree and broadcast down it.
//     The second tree mirrors (or, for odd W, shifts) the first, so a rank that is
//     interior in one tree is a leaf in the other and the links carry even loads.
//   - Reduce and Broadcast use a binomial tree rooted at the call's root.
//   - Barrier is an empty reduce up and broadcast down the binomial tree of rank 0.
//
// Every data path is cut into chunks and pipelined: a rank forwards chunk i (up when
// all its children's chunk i is reduced in, down as soon as it arrived) while chunk i+1
// is still moving. Each link direction has one goroutine that sends (and one that
// receives) its messages in one fixed order that both ends compute; in the double tree
// a link may carry one tree's upward traffic and the other's downward traffic, and that
// order interleaves them so neither blocks the other's pipeline (see schedule).
// AllGather and ReduceScatter fall back to ring, the rest to naive (algos.Resolve).
//
//	import _ "github.com/goccl/goccl/algos/tree" // registers "tree"
package tree
