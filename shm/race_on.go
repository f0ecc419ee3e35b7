//go:build race

package shm

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// The race detector does not see the ring's synchronisation: its atomics work on the
// mapped segment, outside the memory the detector watches. Two goroutine ranks of one
// process that pass a buffer's contents through a ring therefore looked unordered to
// it, and an in-place collective, whose sends read what its receives later overwrite
// (ordered only through the peer), was reported as a race. In race builds each
// direction of a segment also has a counter on the Go heap, shared by both ends of the
// link within the process: the producer adds to it before each publishing store and the
// consumer loads it after each observation, which is the same order the ring's own
// release and acquire give, made visible.

var raceTokens sync.Map // segment path and direction -> *uint64

// raceToken is the counter of direction dir of the segment at path.
func raceToken(path string, dir int) *uint64 {
	v, _ := raceTokens.LoadOrStore(path+"#"+strconv.Itoa(dir), new(uint64))
	return v.(*uint64)
}

// raceForget drops the counters of the segment at path (its ends keep their pointers).
func raceForget(path string) {
	raceTokens.Delete(path + "#0")
	raceTokens.Delete(path + "#1")
}

// raceRelease and raceAcquire do nothing for a ring that no link owns (nil counter).
func raceRelease(t *uint64) {
	if t != nil {
		atomic.AddUint64(t, 1)
	}
}

func raceAcquire(t *uint64) {
	if t != nil {
		atomic.LoadUint64(t)
	}
}
