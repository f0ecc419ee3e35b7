//go:build !amd64

package streamcopy

// useAVX is false: no streaming kernel exists here.
var useAVX = false

// Copy is the built-in copy where no streaming kernel exists.
func Copy(dst, src []byte) int { return copy(dst, src) }
