// Package shape computes the communication graphs the algorithms and the cost model
// share: NCCL's double binary tree and the binomial tree. It is pure arithmetic on rank
// numbers, so the cost model can use it for worlds of any size without running anything.
package shape

// Node is one rank's place in a tree: its parent (-1 at the root) and its children, in
// the order the algorithm serves them.
type Node struct {
	Parent   int
	Children []int
}

// BTree is NCCL's binary tree over ranks 0..n-1 (ncclGetBtree): rank 0 is the root with
// a single child (the largest power of two below n); every other rank r, with lowest set
// bit b, hangs under (r^b)|(b<<1), or r^b when that is out of range, and has children
// r-b/2 and the largest in-range r+b/2^k. It is an in-order tree of depth about log2 n.
func BTree(n, rank int) Node {
	if n <= 1 {
		return Node{Parent: -1}
	}
	bit := 1
	for bit < n && bit&rank == 0 {
		bit <<= 1
	}
	if rank == 0 {
		return Node{Parent: -1, Children: []int{bit >> 1}}
	}
	up := (rank ^ bit) | bit<<1
	if up >= n {
		up = rank ^ bit
	}
	node := Node{Parent: up}
	low := bit >> 1
	if low == 0 {
		return node
	}
	node.Children = append(node.Children, rank-low)
	for ; low > 0; low >>= 1 {
		if rank+low < n {
			node.Children = append(node.Children, rank+low)
			break
		}
	}
	return node
}

// DoubleTree returns rank's place in NCCL's two complementary trees (ncclGetDtree): the
// first is BTree; the second mirrors it (rank -> n-1-rank) when n is even and shifts it
// by one rank when n is odd, so that most ranks are interior in at most one tree and the
// two halves of an AllReduce load the links evenly.
func DoubleTree(n, rank int) [2]Node {
	t0 := BTree(n, rank)
	var m, inv func(int) int
	if n%2 == 0 {
		m = func(r int) int { return n - 1 - r }
		inv = m
	} else {
		m = func(r int) int { return (r - 1 + n) % n }
		inv = func(r int) int { return (r + 1) % n }
	}
	b := BTree(n, m(rank))
	t1 := Node{Parent: -1}
	if b.Parent >= 0 {
		t1.Parent = inv(b.Parent)
	}
	for _, c := range b.Children {
		t1.Children = append(t1.Children, inv(c))
	}
	return [2]Node{t0, t1}
}

// Binomial is rank's place in the binomial tree rooted at root: relative rank v has
// parent v with its lowest set bit cleared and children v+2^k for every 2^k below that
// bit (all 2^k < n at the root), largest subtree first, so the deepest branch starts
// earliest.
func Binomial(n, root, rank int) Node {
	v := (rank - root + n) % n
	abs := func(x int) int { return (x + root) % n }
	node := Node{Parent: -1}
	if v != 0 {
		node.Parent = abs(v & (v - 1))
	}
	limit := n
	if v != 0 {
		limit = v & -v
	}
	top := 1
	for top < limit && top < n {
		top <<= 1
	}
	for k := top >> 1; k > 0; k >>= 1 {
		if k < limit && v+k < n {
			node.Children = append(node.Children, abs(v+k))
		}
	}
	return node
}

// Depth returns the number of edges from rank to the root of the tree given by at.
func Depth(n, rank int, at func(int) Node) int {
	d := 0
	for r := rank; ; d++ {
		p := at(r).Parent
		if p < 0 || d > n {
			return d
		}
		r = p
	}
}
