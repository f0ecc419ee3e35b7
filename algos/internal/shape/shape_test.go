package shape

import (
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkTree verifies that at describes one tree over 0..n-1: a single root, parents and
// children that agree, every rank reachable from the root exactly once, and a depth
// within maxDepth.
func checkTree(t *testing.T, n int, at func(int) Node, maxChildren, maxDepth int) {
	t.Helper()
	roots := 0
	for r := range n {
		node := at(r)
		require.LessOrEqual(t, len(node.Children), maxChildren, "n=%d rank %d children %v", n, r, node.Children)
		if node.Parent < 0 {
			roots++
		} else {
			require.Contains(t, at(node.Parent).Children, r, "n=%d: rank %d's parent %d does not list it", n, r, node.Parent)
		}
		for _, c := range node.Children {
			require.True(t, c >= 0 && c < n && c != r, "n=%d rank %d child %d", n, r, c)
			require.Equal(t, r, at(c).Parent, "n=%d: child %d of %d has another parent", n, c, r)
		}
		require.LessOrEqual(t, Depth(n, r, at), maxDepth, "n=%d rank %d too deep", n, r)
	}
	require.Equal(t, 1, roots, "n=%d roots", n)
	// Reachability: a walk from the root visits every rank once.
	seen := make([]bool, n)
	var root int
	for r := range n {
		if at(r).Parent < 0 {
			root = r
		}
	}
	stack := []int{root}
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		require.False(t, seen[r], "n=%d: rank %d reached twice", n, r)
		seen[r] = true
		stack = append(stack, at(r).Children...)
	}
	for r, s := range seen {
		require.True(t, s, "n=%d: rank %d unreachable", n, r)
	}
}

func TestTrees(t *testing.T) {
	for n := 1; n <= 1024; n++ {
		if n > 70 && bits.OnesCount(uint(n)) > 2 && n%97 != 0 {
			continue // every small world, then powers of two, their neighbours and a few others
		}
		depth := bits.Len(uint(n)) + 1
		checkTree(t, n, func(r int) Node { return BTree(n, r) }, 2, depth)
		for tr := range 2 {
			checkTree(t, n, func(r int) Node { return DoubleTree(n, r)[tr] }, 2, depth+1)
		}
		for _, root := range []int{0, n / 2, n - 1} {
			checkTree(t, n, func(r int) Node { return Binomial(n, root, r) }, bits.Len(uint(n)), bits.Len(uint(n)))
		}
	}
}

// TestDoubleTreeBalance checks the point of the second tree: with n even, no rank is
// interior (has children) in both trees.
func TestDoubleTreeBalance(t *testing.T) {
	for n := 2; n <= 64; n += 2 {
		for r := range n {
			dt := DoubleTree(n, r)
			require.False(t, len(dt[0].Children) > 0 && len(dt[1].Children) > 0, "n=%d rank %d interior in both trees", n, r)
		}
	}
}
