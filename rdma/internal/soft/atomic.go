package soft

import "sync/atomic"

func casU64(p *uint64, old, new uint64) bool { return atomic.CompareAndSwapUint64(p, old, new) }
func addU32(p *uint32, d uint32) uint32      { return atomic.AddUint32(p, d) }
