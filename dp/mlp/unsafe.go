package mlp

import "unsafe"

func unsafeBytes(xs []float32) []byte {
	if len(xs) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), 4*len(xs))
}
