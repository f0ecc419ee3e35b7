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
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	m := n &^ 127
	if useAVX && m >= streamMin && addr(dst)&31 == 0 {
		copyNT(&dst[0], &src[0], m)
		return m + copy(dst[m:n], src[m:n])
	}
	return copy(dst, src)
}
