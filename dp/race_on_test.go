//go:build race

package dp_test

// raceEnabled: goroutine ranks over shm pass buffers through atomics in mapped memory,
// which the race detector cannot see (the root package's race_on_test.go).
const raceEnabled = true
