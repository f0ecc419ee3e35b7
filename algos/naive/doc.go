// Package naive is the parameter-server shape: every rank sends to a root (rank 0, or
// the call's root), the root reduces or collects, and sends the result back. It is the
// baseline the other algorithms are measured against, the best choice at two ranks for
// some sizes, and the end of every fallback chain: it implements every collective.
//
// The root's work grows with the world size (it receives and sends (W-1) x the buffer),
// so it does not scale; it is simple and its pipelining still overlaps: the root reduces
// chunk i while chunk i+1 arrives and sends chunk i back while reducing chunk i+1.
// AllToAll is a direct pairwise exchange (step k: send to rank+k, receive from rank-k)
// and SendRecv a direct transfer; neither uses the root.
//
//	import _ "github.com/goccl/goccl/algos/naive" // registers "naive"
package naive
