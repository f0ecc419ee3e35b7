package rdma

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

// mrCache registers memory once per address range (NCCL's ncclIbRegMr cache): a
// request for a range that lies inside a region already registered with at least the
// requested access reuses it and takes a reference. Only transport-owned memory (from
// Device.Alloc) is ever registered: Go heap memory must not be, because the collector may
// free and reuse it while the NIC still holds the pages, so user payloads are copied
// through the link's registered staging slots.
type mrCache struct {
	dev     rc.Device
	mu      sync.Mutex
	entries []*mrEntry
}

type mrEntry struct {
	start, end uint64
	access     rc.Access
	mr         rc.MR
	refs       int
}

func newMRCache(dev rc.Device) *mrCache { return &mrCache{dev: dev} }

func memRange(m rc.Memory) (uint64, uint64) {
	b := m.Bytes()
	if len(b) == 0 {
		return 0, 0
	}
	s := uint64(uintptr(unsafe.Pointer(&b[0])))
	return s, s + uint64(len(b))
}

// lookup returns the entry that covers [start, end) with access, if any. A link has a
// handful of regions, so a scan is the right structure.
func (c *mrCache) lookup(start, end uint64, access rc.Access) *mrEntry {
	for _, e := range c.entries {
		if e.start <= start && end <= e.end && e.access&access == access {
			return e
		}
	}
	return nil
}

func (c *mrCache) register(m rc.Memory, access rc.Access) (rc.MR, error) {
	start, end := memRange(m)
	if start == end {
		return nil, fmt.Errorf("rdma: register: %w: empty memory", transport.ErrInvalid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.lookup(start, end, access); e != nil {
		e.refs++
		return e.mr, nil
	}
	mr, err := c.dev.Register(m, access)
	if err != nil {
		return nil, err
	}
	c.entries = append(c.entries, &mrEntry{start: start, end: end, access: access, mr: mr, refs: 1})
	return mr, nil
}

// release drops a reference and deregisters the region with its last one.
func (c *mrCache) release(mr rc.MR) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.mr != mr {
			continue
		}
		if e.refs--; e.refs > 0 {
			return nil
		}
		c.entries = append(c.entries[:i], c.entries[i+1:]...)
		return mr.Close()
	}
	return fmt.Errorf("rdma: release: %w: memory region is not registered", transport.ErrInvalid)
}
