//go:build !race

package shm

// storeRelease32 stores v at addr with release ordering only: every load and store
// before it in program order is visible to another core before it is. On amd64 every
// store is such a store (TSO), so this is a plain MOV, without the full fence (XCHG)
// that sync/atomic's stores are: a fence right after a record was written into a line
// the peer is polling would stall this core until the line is its own. Being assembly,
// the call is also a compiler barrier.
//
//go:noescape
func storeRelease32(addr *int32, v int32)

//go:noescape
func storeRelease64(addr *uint64, v uint64)
