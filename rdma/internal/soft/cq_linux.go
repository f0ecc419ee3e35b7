//go:build linux

package soft

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

// Completion queue layout: header, then depth entries. head is written only by the
// owner (the consumer); tail is reserved by producers with compare-and-swap; each entry
// carries seq = its index + 1 once published, which is how the consumer knows it is
// complete. futex counts pushes so a sleeping consumer is woken.
const (
	cqHead      = 64
	cqTail      = 128
	cqFutex     = 192
	cqWaiters   = 196
	cqEntries   = 256
	cqEntrySize = 48 // seq u64 | id u64 | status | opcode | len | imm | qpn | vendor
)

var errOverrun = errors.New("completion queue overrun")

// ring is the shared completion ring; producers may be this process or a peer's.
type ring struct {
	s     *seg
	depth uint64
}

func (r ring) push(c rc.Completion) error {
	var t uint64
	for {
		t = r.s.load64(cqTail)
		h := r.s.load64(cqHead)
		if h > t {
			continue // others pushed and the consumer took them since we read tail
		}
		if t-h >= r.depth {
			if r.s.load64(cqTail) != t {
				continue
			}
			return errOverrun
		}
		if casU64(r.s.u64(cqTail), t, t+1) {
			break
		}
	}
	e := cqEntries + int(t%r.depth)*cqEntrySize
	r.s.store64(e+8, c.ID)
	r.s.store32(e+16, uint32(c.Status))
	r.s.store32(e+20, uint32(c.Opcode))
	r.s.store32(e+24, c.Len)
	r.s.store32(e+28, c.Imm)
	r.s.store32(e+32, c.QPNum)
	r.s.store32(e+36, c.VendorErr)
	raceRelease(r.s.race)
	r.s.store64(e, t+1)
	addU32(r.s.u32(cqFutex), 1)
	if r.s.load32(cqWaiters) != 0 {
		futexWakeAll(r.s.u32(cqFutex))
	}
	return nil
}

func (r ring) ready() bool {
	h := r.s.load64(cqHead)
	return r.s.load64(cqEntries+int(h%r.depth)*cqEntrySize) == h+1
}

type cq struct {
	mu     sync.Mutex // one consumer at a time
	ring   ring
	closed bool
}

func (c *cq) Poll(out []rc.Completion) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("soft: poll cq: %w", transport.ErrClosed)
	}
	s, n := c.ring.s, 0
	for n < len(out) {
		h := s.load64(cqHead)
		e := cqEntries + int(h%c.ring.depth)*cqEntrySize
		if s.load64(e) != h+1 {
			break
		}
		raceAcquire(s.race)
		out[n] = rc.Completion{
			ID: s.load64(e + 8), Status: rc.Status(s.load32(e + 16)), Opcode: rc.WCOpcode(s.load32(e + 20)),
			Len: s.load32(e + 24), Imm: s.load32(e + 28), QPNum: s.load32(e + 32), VendorErr: s.load32(e + 36),
		}
		s.store64(cqHead, h+1)
		n++
	}
	return n, nil
}

// Wait sleeps on the futex word until a producer pushes, Wake is called or d passes.
func (c *cq) Wait(d time.Duration) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	s := c.ring.s
	c.mu.Unlock()
	s.store32(cqWaiters, 1)
	v := s.load32(cqFutex)
	if !c.ring.ready() {
		futexWaitOn(s.u32(cqFutex), v, int64(d))
	}
	s.store32(cqWaiters, 0)
}

func (c *cq) Wake() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	addU32(c.ring.s.u32(cqFutex), 1)
	futexWakeAll(c.ring.s.u32(cqFutex))
}

// Close unmaps the ring; peers that still hold a mapping keep valid memory.
func (c *cq) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.ring.s.close()
}
