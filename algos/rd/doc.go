// Package rd is the latency-optimal AllReduce for small messages, and Barrier,
// AllGather and ReduceScatter: a direct exchange
// (every rank sends its vector to every other rank and reduces the W vectors itself,
// one step) for vectors of one eager message on up to DirectMax ranks, from 4 ranks
// only up to algos.RDDirectBytes (32 KiB); recursive doubling (log2 W steps, each an
// exchange of the whole vector with the rank whose number differs in one bit; worlds
// that are not a power of two fold their extra ranks in with one step before and one
// after) for other vectors of one eager message, and at 2 and 3 ranks; and from 4
// ranks, past one eager message or RDDirectBytes, Rabenseifner's recursive halving and
// doubling (algos.RDHalves): log2 W steps that each hand the partner half of what a
// rank still reduces, then log2 W that gather the reduced blocks back, 2(W-1)/W of the
// vector each way as in the ring, in 2 log2 W steps instead of 2(W-1).
//
// Where it wins: the ring pays 2(W-1) dependent hops, the double tree 2 x depth, the
// naive root 2; the direct exchange pays one. When ranks outnumber cores every hop is
// a context switch, so at 3-8 ranks on a 2-core host a small AllReduce is decided by
// its hops. Its price is bandwidth: W-1 whole buffers in and out of every rank for the
// exchange, log2 W for recursive doubling, against the ring's 2(W-1)/W, which halving
// matches; the cost model (algos.CostModel, formula "rd") knows all three, and auto
// picks rd only where it wins. Over tcp at 4 ranks halving took 0.89-0.99x the ring's
// time at 2-8 MiB, where recursive doubling took 1.5x at 4-8 MiB; over shm at 4 ranks
// on 2 cores it takes 1.7-1.8x the ring's from 4 MiB, where auto runs the staged
// algorithm.
//
// Its AllGather and ReduceScatter are one step for blocks up to PairwiseOneStepMax (16
// KiB): every rank sends each other rank the block it needs and then receives one from
// each, (W-1)/W of the data each way as in the ring, in one dependent hop instead of
// W-1. Larger blocks go, over a power-of-two world from 4 ranks (algos.PairwiseHalves),
// by recursive doubling (AllGather) or recursive halving (ReduceScatter): log2 W steps,
// each a swap with the rank whose number differs in one bit, moving (W-1)/W of the data
// as the ring does. Over tcp at 4 ranks an AllGather took 0.82-0.94x the ring's time at
// 256 KiB-16 MiB but 1.07x at 512 KiB, and a ReduceScatter 0.73-0.87x to 2 MiB (1.15x
// at 512 KiB) and 1.05-1.09x from 4 MiB; over shm on 2 cores, where both ranks of a
// swap must run at once, both take longer than the ring's, and the cost model prices
// all of it. Other worlds go step by step (a block to rank+k and one from rank-k at
// step k), which costs what the ring's steps cost, and the cost model prices them so.
//
// Its Barrier is the same shapes with empty messages: one direct exchange up to
// DirectMax ranks, and above that the dissemination barrier, ceil(log2 W) rounds in
// each of which every rank sends an empty message 2^k ranks ahead and receives one from
// 2^k ranks behind. At two ranks it is one exchange, where the tree's and naive's
// barriers are two dependent hops (up, then down).
//
// Every rank ends with the same bits, for every dtype and op: the direct exchange
// reduces the W vectors in rank order on every rank, and each recursive-doubling step
// computes a op b on one side and b op a on the other, which IEEE arithmetic (and Go's
// min and max, and integer wrap-around) makes identical.
//
// Import it for its side effect of registering "rd":
//
//	import _ "github.com/goccl/goccl/algos/rd"
//	comm.SetAlgo("allreduce:rd<16K,auto")
package rd
