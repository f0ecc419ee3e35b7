// Package seeds says which seeds goccl's randomized tests run, the same way for all of
// them (the root package's TestRandomCalls and TestRandomCancel, dp's
// TestRandomEquivalence, the transport suite's Random check).
package seeds

import (
	"os"
	"strconv"
	"testing"
)

// List is the seeds a randomized test runs: n of them from first, or, where the
// environment says so, GOCCL_RANDOM_SEEDS of them (a soak) from GOCCL_RANDOM_SEED
// (one that failed, again). A value that is not a number fails the test.
func List(t testing.TB, n int, first uint64) []uint64 {
	t.Helper()
	if v := os.Getenv("GOCCL_RANDOM_SEEDS"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 0 {
			t.Fatalf("GOCCL_RANDOM_SEEDS=%q: want a count", v)
		}
		n = c
	}
	if v := os.Getenv("GOCCL_RANDOM_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("GOCCL_RANDOM_SEED=%q: want an unsigned integer", v)
		}
		first = s
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = first + uint64(i)
	}
	return seeds
}
