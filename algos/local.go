package algos

import (
	"unsafe"

	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// RunLocal completes a validated call on a world of one rank, where every collective is
// a copy from Send to Recv (plus Avg's finishing step, a division by 1) and Barrier and
// self-SendRecv are trivially done.
func RunLocal(a *Args) error {
	switch a.Kind {
	case transport.KindBarrier:
		return nil
	case transport.KindSendRecv:
		if a.SendPeer == 0 && a.RecvPeer == 0 {
			CopyDistinct(a.Recv, a.Send)
		}
		return nil
	}
	CopyDistinct(a.Recv, a.Send)
	if reducing(a.Kind) {
		return reduce.Finish(a.DType, a.Op, a.Recv, 1)
	}
	return nil
}

// CopyDistinct copies src into dst unless they are the same memory (an in-place call),
// where the copy would be a no-op that still streams every byte through the cache.
func CopyDistinct(dst, src []byte) {
	if len(dst) == 0 || SameMemory(dst, src) {
		return
	}
	copy(dst, src)
}

// Apart reports whether a and b share no byte.
func Apart(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	x, y := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return x+uintptr(len(a)) <= y || y+uintptr(len(b)) <= x
}

// SameMemory reports whether a and b start at the same address.
func SameMemory(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}
