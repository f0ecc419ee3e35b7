//go:build !amd64 || race

package relstore

import "sync/atomic"

// Uint32 stores v at addr with (at least) release ordering: off amd64, and under the
// race detector (which sees sync/atomic but not assembly), it is sync/atomic's
// sequentially consistent store.
func Uint32(addr *uint32, v uint32) { atomic.StoreUint32(addr, v) }

// Uint64 is Uint32 for a 64-bit word.
func Uint64(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }
