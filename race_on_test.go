//go:build race

package goccl

// raceEnabled: the race detector cannot see the happens-before edges that run through
// atomics in shared memory between two goroutine ranks (the shm rings are mmapped, outside
// the Go heap), so it reports the ring's in-place reuse of a buffer as a race.
const raceEnabled = true
