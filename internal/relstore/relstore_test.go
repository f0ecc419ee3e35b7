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
	stores(t, Uint32, atomic.LoadUint32, 0, 1, 0x80000000, math.MaxUint32)
	stores(t, Int32, atomic.LoadInt32, 0, -1, math.MinInt32, math.MaxInt32)
	stores(t, Uint64, atomic.LoadUint64, 0, 1, 1<<63, math.MaxUint64)
	stores(t, Int64, atomic.LoadInt64, 0, -1, math.MinInt64, math.MaxInt64)
}

func stores[T comparable](t *testing.T, store func(*T, T), load func(*T) T, vals ...T) {
	t.Helper()
	var w [3]T
	var zero T
	for _, v := range vals {
		store(&w[1], v)
		require.Equal(t, v, load(&w[1]))
		require.Equal(t, zero, w[0], "the word before %v", v)
		require.Equal(t, zero, w[2], "the word after %v", v)
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
