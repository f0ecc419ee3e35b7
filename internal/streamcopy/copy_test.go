package streamcopy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCopy checks Copy against the built-in copy: lengths around the streaming bounds
// (0, 1, odd, 4 KiB and its neighbours, blocks of 128 and not, 1 MiB + 3), destinations
// aligned and not (which copy their first bytes up to a 32-byte boundary), a shorter source or destination; the
// guard bytes on both sides of the destination must stay as they were.
func TestCopy(t *testing.T) {
	const guard = 64
	for _, n := range []int{0, 1, 127, 128, 4095, 4096, 4097, 4096 + 127, 4096 + 128, 12345, 1<<20 + 3} {
		for _, shift := range []int{0, 1, 32, 63} { // the destination's offset from a 64-byte boundary
			for _, short := range []int{0, 1, 100} { // bytes the source lacks
				t.Run(fmt.Sprintf("n%d/shift%d/short%d", n, shift, short), func(t *testing.T) {
					src := make([]byte, max(n-short, 0)+5)[5:] // an unaligned source
					for i := range src {
						src[i] = byte(i*7 + 3)
					}
					buf := make([]byte, n+2*guard+64)
					base := 64 - int(addr(buf)%64) // buf[base] is 64-byte aligned
					dst := buf[base+guard+shift : base+guard+shift+n]
					for i := range buf {
						buf[i] = 0xEE
					}
					want := make([]byte, len(buf))
					copy(want, buf)
					wantN := copy(want[base+guard+shift:base+guard+shift+n], src)
					require.Equal(t, wantN, Copy(dst, src))
					require.Equal(t, want, buf)
				})
			}
		}
	}
}

// TestCopyFallback runs the same copies with the streaming kernel off.
func TestCopyFallback(t *testing.T) {
	old := useAVX
	useAVX = false
	defer func() { useAVX = old }()
	src := make([]byte, 1<<16+5)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([]byte, len(src))
	require.Equal(t, len(src), Copy(dst, src))
	require.Equal(t, src, dst)
}

func BenchmarkCopy(b *testing.B) {
	for _, n := range []int{64 << 10, 1 << 20, 16 << 20} {
		src, dst := make([]byte, n), make([]byte, n)
		b.Run(fmt.Sprintf("stream/%dK", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				Copy(dst, src)
			}
		})
		b.Run(fmt.Sprintf("builtin/%dK", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}
