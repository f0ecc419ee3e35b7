//go:build !amd64 || race

package shm

import "sync/atomic"

// storeRelease32 stores v at addr with (at least) release ordering: off amd64, and
// under the race detector (which sees sync/atomic but not assembly), it is
// sync/atomic's sequentially consistent store.
func storeRelease32(addr *int32, v int32) { atomic.StoreInt32(addr, v) }

func storeRelease64(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }
