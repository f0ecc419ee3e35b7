package ring

import (
	"fmt"

	"github.com/goccl/goccl/algos"
)

// SetSerialLarge replaces the rule for running large steps serially and returns a
// function that restores it.
func SetSerialLarge(f func(algos.Peers) bool) (restore func()) {
	old := serialLarge
	serialLarge = f
	return func() { serialLarge = old }
}

// SetColdBytes replaces the output size from which an AllReduce's last step receives
// cold (and two ranks interleave their steps), and returns a function that restores it.
func SetColdBytes(n int) (restore func()) {
	old := coldBytes
	coldBytes = n
	return func() { coldBytes = old }
}

// Interleave is interleave's order as a list: "s3" for reduce-scatter chunk 3, "g0"
// for all-gather chunk 0.
func Interleave(nrs, nag int) []string {
	var out []string
	interleave(nrs, nag, func(rs bool, i int) {
		if rs {
			out = append(out, fmt.Sprintf("s%d", i))
		} else {
			out = append(out, fmt.Sprintf("g%d", i))
		}
	})
	return out
}

// Interleaves says whether a two-rank AllReduce of args on links of the given eager
// size would run allReduce2.
func Interleaves(p algos.Peers, a *algos.Args) bool {
	return interleaves(&pipe{p: p, a: a, cs: algos.ChunkSize(a, algos.DefaultChunkBytes), eager: algos.EagerLimit(p)})
}

// Fused says whether this rank would run a two-rank AllReduce of args as allReduce2's
// fused steps (fusedLink).
func Fused(p algos.Peers, a *algos.Args) bool {
	pp := &pipe{p: p, a: a, cs: algos.ChunkSize(a, algos.DefaultChunkBytes), eager: algos.EagerLimit(p),
		next: (p.Rank() + 1) % p.Size(), prev: (p.Rank() + 1) % p.Size()}
	return interleaves(pp) && (len(a.Recv) >= coldBytes || fusable(a)) && fusedLink(pp) != nil
}
