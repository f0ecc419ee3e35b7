// Package staged is AllReduce, AllGather, ReduceScatter and Broadcast through a staging
// area that the ranks of one host share (algos.Stager; the communicator keeps one per
// group whose links are all shm), for ordinary buffers that the ranks cannot read from
// each other (for buffers in AllocShared memory, algos/direct reads them in place
// instead).
//
// An AllReduce vector goes through the area in windows. Each rank's part of the area holds two
// windows (used in turn), and a window holds, per rank, the same W slices as the whole
// vector's window: for every window, rank r
//
//  1. copies the slices of its input that the other ranks reduce into its part (not its
//     own slice r: it reads that from its input);
//  2. after a hand-shake (every rank has staged the window), reduces slice r: its own
//     input's slice and every peer's staged copy of it, in rank order starting with its
//     own, into its part's slice r;
//  3. after a second hand-shake (every slice is final), copies every rank's finished
//     slice from that rank's part into its output.
//
// Per byte of the vector a rank reads its input once and writes its output once, plus
// the copies through the area (written through the cache, so much of a window is still
// there when a peer reads it; see copyCached), against the ring's 2(W-1) steps,
// each a copy into and out of a ring buffer and a hand-off between ranks. The ring's steps are what cost when the
// ranks outnumber the cores: every step of every chunk waits for a peer to be scheduled.
// Here the ranks meet twice per window (two hand-shakes of W-1 small messages each) and
// otherwise stream.
//
// AllGather and ReduceScatter go the same way with one hand-shake per window. For
// AllGather a window is a stretch of every rank's block: rank r copies its own into its
// part (and into its output), and after the hand-shake copies every peer's from that
// peer's part into its output. For ReduceScatter a window is the same stretch of all W
// blocks of the input: rank r copies the stretches of the blocks its peers own into its
// part, and after the hand-shake reduces the stretch of block r, its own input's first
// and then every peer's staged copy in rank order from r+1, straight into its output.
//
// Broadcast stages the root's window in the root's part, and after one hand-shake every
// other rank copies it out.
//
// Two windows in turn make the first hand-shake of window k+1 also the point after which
// nobody reads window k-1's slot any more, so one more hand-shake at exit (nobody
// returns while a peer still copies from its part) completes the call.
//
// Results: each slice of each window is reduced once, by one rank, in a fixed order, and
// copied to the others, so every rank ends with the same bits (as with the direct and
// ring algorithms).
package staged
