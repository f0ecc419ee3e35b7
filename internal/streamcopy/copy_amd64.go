package streamcopy

import "golang.org/x/sys/cpu"

// useAVX selects the kernel; tests clear it to check the fallback.
var useAVX = cpu.X86.HasAVX

//go:noescape
func copyNT(dst, src *byte, n int)

// streamMin is the smallest copy that streams. A bound of 512 B measured no different
// on 2-rank AllReduces of 512 B-8 KiB (BENCHMARKS.md, "Speed", 23a), so copies below
// 4 KiB keep the built-in copy and skip the fence.
const streamMin = 4 << 10

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns that number,
// as the built-in copy does. dst and src must not overlap. The streamed stores are
// fenced (SFENCE) before it returns, so a store that publishes the copy comes after
// them.
//
// A destination off a 32-byte boundary gets its first bytes, up to the boundary, from
// the built-in copy, and streams from there.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if !useAVX || n < streamMin {
		return copy(dst, src)
	}
	h := int(-addr(dst) & 31) // bytes up to the first 32-byte boundary
	m := (n - h) &^ 127
	copy(dst[:h], src[:h])
	copyNT(&dst[h], &src[h], m)
	return h + m + copy(dst[h+m:n], src[h+m:n])
}
