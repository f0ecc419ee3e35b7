//go:build race

package soft

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// The race detector does not see this provider's synchronisation: its atomics work on
// mapped memfds, outside the memory the detector watches. Two goroutine ranks of one
// process whose in-place collective sends a buffer and later receives into it, ordered
// only through the peer (our write into its memory, its completion, its write into
// ours, our completion), looked unordered to it (TestRandomCancel under -race, rdma at
// 2 ranks, the ring). As shm does (shm/race_on.go), in race builds each segment also has
// a counter on the Go heap, shared by every mapping of it in the process: a completion
// queue's producer adds to it before the store that publishes an entry, and the
// consumer loads it after it sees one, the order the queue's own release and acquire
// give, made visible.

var raceTokens sync.Map // "pid/fd" of the memfd's creator -> *uint64

func raceKey(pid, fd int) string { return strconv.Itoa(pid) + "/" + strconv.Itoa(fd) }

// raceToken is the counter of the memfd that process pid created as descriptor fd.
func raceToken(pid, fd int) *uint64 {
	v, _ := raceTokens.LoadOrStore(raceKey(pid, fd), new(uint64))
	return v.(*uint64)
}

// raceForget drops the counter of a memfd its creator closes (mappings keep theirs).
func raceForget(pid, fd int) { raceTokens.Delete(raceKey(pid, fd)) }

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
