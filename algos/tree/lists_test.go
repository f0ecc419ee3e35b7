package tree

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos/internal/shape"
)

// TestListsFromThePool: the pipelined AllReduce's step lists come from a pool. Taken
// again for another world, whose links differ, they hold what buildSteps lays out
// afresh, and the earlier call's other links are empty; once warm, taking and
// returning them allocates nothing (built per call, they were 2.5-10 KiB per call and
// rank at 2-4 ranks and 4-12 MiB).
func TestListsFromThePool(t *testing.T) {
	for _, tc := range []struct {
		w, rank int
		nchunks [2]int
	}{{8, 3, [2]int{5, 4}}, {4, 0, [2]int{3, 3}}, {5, 4, [2]int{1, 2}}, {2, 1, [2]int{9, 8}}, {8, 3, [2]int{7, 7}}} {
		nodes := shape.DoubleTree(tc.w, tc.rank)
		l := getLists(nodes, tc.nchunks, tc.w)
		wantSends, wantRecvs := map[int][]step{}, map[int][]step{}
		buildSteps(wantSends, wantRecvs, nodes, tc.nchunks, tc.w)
		for _, side := range []struct {
			name      string
			got, want map[int][]step
		}{{"sends", l.sends, wantSends}, {"recvs", l.recvs, wantRecvs}} {
			for peer, list := range side.got {
				if len(list) == 0 {
					require.NotContains(t, side.want, peer, "w=%d rank=%d %s: link to %d left empty", tc.w, tc.rank, side.name, peer)
					continue
				}
				require.Equal(t, side.want[peer], list, "w=%d rank=%d %s to %d", tc.w, tc.rank, side.name, peer)
			}
			for peer := range side.want {
				require.Contains(t, side.got, peer, "w=%d rank=%d %s: link to %d missing", tc.w, tc.rank, side.name, peer)
			}
		}
		l.put()
	}
	if raceBuild {
		return // the lists' values are checked above; the pool's reuse is not, under -race
	}
	nodes := shape.DoubleTree(8, 3)
	getLists(nodes, [2]int{16, 16}, 8).put()
	allocs := testing.AllocsPerRun(100, func() { getLists(nodes, [2]int{16, 16}, 8).put() })
	require.Less(t, allocs, 1.0, "allocations per call with warm lists")
}
