package relstore

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each store writes exactly its word: the value read back, its neighbours untouched.
func TestStores(t *testing.T) {
	var w32 [3]uint32
	for _, v := range []uint32{0, 1, 0x80000000, math.MaxUint32} {
		Uint32(&w32[1], v)
		require.Equal(t, v, atomic.LoadUint32(&w32[1]))
		require.Zero(t, w32[0])
		require.Zero(t, w32[2])
	}
	var i32 [3]int32
	for _, v := range []int32{0, -1, math.MinInt32, math.MaxInt32} {
		Int32(&i32[1], v)
		require.Equal(t, v, atomic.LoadInt32(&i32[1]))
		require.Zero(t, i32[0])
		require.Zero(t, i32[2])
	}
	var w64 [3]uint64
	for _, v := range []uint64{0, 1, 1 << 63, math.MaxUint64} {
		Uint64(&w64[1], v)
		require.Equal(t, v, atomic.LoadUint64(&w64[1]))
		require.Zero(t, w64[0])
		require.Zero(t, w64[2])
	}
	var i64 [3]int64
	for _, v := range []int64{0, -1, math.MinInt64, math.MaxInt64} {
		Int64(&i64[1], v)
		require.Equal(t, v, atomic.LoadInt64(&i64[1]))
		require.Zero(t, i64[0])
		require.Zero(t, i64[2])
	}
}

// Message passing: a reader that sees the flag a writer stored last sees the data it
// stored before, every time.
func TestMessagePassing(t *testing.T) {
	const rounds = 100000
	var data, flag uint64
	done := make(chan error)
	go func() {
		for i := uint64(1); i <= rounds; i++ {
			for atomic.LoadUint64(&flag) != 2*i-1 {
			}
			if got := atomic.LoadUint64(&data); got != i {
				done <- fmt.Errorf("round %d: the flag was seen before the data: got %d", i, got)
				return
			}
			Uint64(&flag, 2*i)
		}
		done <- nil
	}()
	for i := uint64(1); i <= rounds; i++ {
		Uint64(&data, i)
		Uint64(&flag, 2*i-1)
		for atomic.LoadUint64(&flag) != 2*i {
		}
	}
	require.NoError(t, <-done)
}
