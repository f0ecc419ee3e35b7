//go:build !race

package relstore

// Uint32 stores v at addr with release ordering only: every load and store before it
// in program order is visible to another core before it is. On amd64 every store is
// such a store (TSO), so this is a plain MOV, without the full fence (XCHG) that
// sync/atomic's stores are: a fence right after a record was written into a line the
// peer is polling would stall this core until the line is its own, and each one costs
// a small call about 6 ns here. Being assembly, the call is also a compiler barrier.
//
//go:noescape
func Uint32(addr *uint32, v uint32)

// Uint64 is Uint32 for a 64-bit word.
//
//go:noescape
func Uint64(addr *uint64, v uint64)
