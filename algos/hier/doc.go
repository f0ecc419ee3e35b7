// Package hier implements the hierarchical algorithm for communicators whose ranks
// span hosts: the traffic that can stay inside a host (shared memory, NVLink) does, and
// only one rank per host talks over the network.
//
//   - AllReduce: every host reduces to its leader (its lowest rank) over the host-local
//     links, the leaders run an AllReduce among themselves over the network, and every
//     leader broadcasts the result inside its host. Avg sums throughout and divides by
//     the world size once, on the leaders.
//   - Reduce: reduce inside each host to its leader (the root leads its own host), then
//     among the leaders to the root.
//   - Broadcast: among the leaders from the root, then inside each host.
//
// Each phase runs on an algos.Group (the ranks of one host, or the leaders) with the
// ring or the tree algorithm, whichever algos.PhaseAlgo predicts is faster for that
// phase's size and link model, so the cost model (CostModel.Predict "hier") prices
// exactly what runs. Hosts come from the Peers' algos.Topology: ranks with the same
// host identity share a host. Without a Topology every rank is taken to share one host
// (the algorithm is then a reduce and a broadcast, correct but no faster). Other
// collectives fall back to ring, then naive (algos.Resolve).
//
// The phases run one after another, so hier trades bandwidth for latency: against a
// ring over the same hosts it takes 2(H-1) network steps instead of 2(W-1) (H hosts, W
// ranks), and adds a host-local reduce and broadcast of the whole buffer. BENCHMARKS.md ("Scale on paper") has
// the model's figures up to W = 1024.
//
//	import _ "github.com/goccl/goccl/algos/hier" // registers "hier"
package hier
