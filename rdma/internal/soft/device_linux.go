//go:build linux

package soft

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

// DeviceName is the one device this provider offers.
const DeviceName = "soft0"

const (
	magicTable = 0x4c42545344524f53 // "SORDSTBL"
	magicQP    = 0x5050515344524f53 // "SORDSQPP"
	magicCQ    = 0x5151435344524f53 // "SORDSCQQ"

	// MR table: header then maxMR entries of mrEntrySize bytes.
	maxMR       = 1024
	tableHdr    = 64
	mrEntrySize = 32 // gen u32 | fd i32 | base u64 | len u64 | access u32 | pad
)

// Open opens the software device. The table of memory regions it creates is what a
// peer consults to check an rkey, like a NIC's MR table.
func Open() (rc.Device, error) {
	t, err := newSeg("goccl-softrdma-mrtable", tableHdr+maxMR*mrEntrySize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", transport.ErrNotSupported, err)
	}
	t.store64(0, magicTable)
	t.store32(8, uint32(os.Getpid()))
	t.store32(12, maxMR)
	return &device{table: t, pid: os.Getpid()}, nil
}

type device struct {
	mu     sync.Mutex
	table  *seg
	pid    int
	nextQP uint32
	gens   [maxMR]uint8
	closed bool
}

func (d *device) Port() rc.PortInfo {
	return rc.PortInfo{Device: DeviceName, Port: 1, LinkLayer: "Software", MTU: 5}
}

type memory struct {
	s   *seg
	dev *device
}

func (m *memory) Bytes() []byte { return m.s.mem }
func (m *memory) Free() error   { return m.s.close() }

// Alloc returns n bytes (rounded up to pages) of shared memory a peer can map.
func (d *device) Alloc(n int) (rc.Memory, error) {
	s, err := newSeg("goccl-softrdma-mem", n)
	if err != nil {
		return nil, err
	}
	return &memory{s: s, dev: d}, nil
}

type mr struct {
	dev  *device
	mem  *memory
	idx  int
	key  uint32
	once sync.Once
}

func (r *mr) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(&r.mem.s.mem[0]))) }
func (r *mr) Len() int     { return len(r.mem.s.mem) }
func (r *mr) LKey() uint32 { return r.key }
func (r *mr) RKey() uint32 { return r.key }

// Close invalidates the rkey: later remote writes to it fail with a remote access error.
func (r *mr) Close() error {
	r.once.Do(func() {
		r.dev.mu.Lock()
		defer r.dev.mu.Unlock()
		if r.dev.table.mem != nil {
			r.dev.table.store32(tableHdr+r.idx*mrEntrySize, 0)
		}
	})
	return nil
}

// Register enters memory from Alloc into the MR table. The key is (index+1)<<8 | gen,
// so a stale key of a reused slot is refused.
func (d *device) Register(m rc.Memory, access rc.Access) (rc.MR, error) {
	sm, ok := m.(*memory)
	if !ok || sm.dev != d || sm.s.mem == nil {
		return nil, fmt.Errorf("soft: register: %w: memory was not allocated by this device", transport.ErrInvalid)
	}
	if access&(rc.AccessRemoteWrite|rc.AccessRemoteRead) != 0 && access&rc.AccessLocalWrite == 0 {
		return nil, fmt.Errorf("soft: register: %w: remote access needs local write (verbs rule)", transport.ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("soft: register: %w", transport.ErrClosed)
	}
	for i := 0; i < maxMR; i++ {
		off := tableHdr + i*mrEntrySize
		if d.table.load32(off) != 0 {
			continue
		}
		d.gens[i]++
		if d.gens[i] == 0 {
			d.gens[i] = 1
		}
		r := &mr{dev: d, mem: sm, idx: i}
		r.key = uint32(i+1)<<8 | uint32(d.gens[i])
		binary.LittleEndian.PutUint32(d.table.mem[off+4:], uint32(sm.s.fd))
		binary.LittleEndian.PutUint64(d.table.mem[off+8:], r.Addr())
		binary.LittleEndian.PutUint64(d.table.mem[off+16:], uint64(r.Len()))
		binary.LittleEndian.PutUint32(d.table.mem[off+24:], uint32(access))
		d.table.store32(off, r.key) // publish last
		return r, nil
	}
	return nil, fmt.Errorf("soft: register: all %d memory regions are in use", maxMR)
}

func (d *device) NewCQ(depth int) (rc.CQ, error) {
	if depth <= 0 {
		return nil, fmt.Errorf("soft: create cq: %w: depth %d, want > 0", transport.ErrInvalid, depth)
	}
	s, err := newSeg("goccl-softrdma-cq", cqEntries+depth*cqEntrySize)
	if err != nil {
		return nil, err
	}
	s.store32(8, uint32(depth))
	s.store64(0, magicCQ)
	return &cq{ring: ring{s: s, depth: uint64(depth)}}, nil
}

func (d *device) NewQP(c rc.CQ, sendDepth, recvDepth int) (rc.QP, error) {
	sc, ok := c.(*cq)
	if !ok {
		return nil, fmt.Errorf("soft: create qp: %w: completion queue is not from this provider", transport.ErrInvalid)
	}
	if sendDepth <= 0 || recvDepth <= 0 {
		return nil, fmt.Errorf("soft: create qp: %w: depths %d/%d, want > 0", transport.ErrInvalid, sendDepth, recvDepth)
	}
	s, err := newSeg("goccl-softrdma-qp", qpRing+recvDepth*8)
	if err != nil {
		return nil, err
	}
	num := atomic.AddUint32(&d.nextQP, 1)
	s.store32(12, uint32(d.pid))
	s.store32(16, num)
	s.store32(20, uint32(sc.ring.s.fd))
	s.store32(24, uint32(recvDepth))
	s.store32(8, stateInit)
	s.store64(0, magicQP)
	return &qp{dev: d, s: s, cq: sc, num: num, recvDepth: uint64(recvDepth), remoteMRs: map[uint32]*remoteMR{}}, nil
}

func (d *device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.table.close()
}

// lookup checks (rkey, addr, n) against a peer's MR table, as the peer's NIC would, and
// returns the fd and the offset of addr inside the region.
func lookup(table *seg, rkey uint32, addr uint64, n int, need rc.Access) (fd int, off uint64, ok bool) {
	idx := int(rkey>>8) - 1
	if idx < 0 || idx >= maxMR {
		return 0, 0, false
	}
	e := tableHdr + idx*mrEntrySize
	if table.load32(e) != rkey {
		return 0, 0, false
	}
	fd = int(int32(binary.LittleEndian.Uint32(table.mem[e+4:])))
	base := binary.LittleEndian.Uint64(table.mem[e+8:])
	length := binary.LittleEndian.Uint64(table.mem[e+16:])
	access := rc.Access(binary.LittleEndian.Uint32(table.mem[e+24:]))
	if access&need != need || addr < base || addr+uint64(n) > base+length || addr+uint64(n) < addr {
		return 0, 0, false
	}
	return fd, addr - base, true
}
