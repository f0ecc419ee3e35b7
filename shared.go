package goccl

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/direct"
	"github.com/goccl/goccl/shm"
	"github.com/goccl/goccl/transport"
)

// sharedMem is the communicator's AllocShared memory. Everything in it is guarded by
// execMu: collectives read it while they run, AllocShared and FreeShared change it
// between them.
type sharedMem struct {
	allocs []*sharedAlloc
	live   int // allocations the peers map (the rest are private memory)
}

// sharedAlloc is one AllocShared call on this rank.
type sharedAlloc struct {
	index int
	mem   []byte        // this rank's part, what AllocShared returned
	views [][]byte      // by rank: each rank's part as this rank maps it; nil when private
	wins  []*shm.Window // every window mapped here, to unmap
}

func (a *sharedAlloc) close() error {
	var errs []error
	for _, w := range a.wins {
		errs = append(errs, w.Close())
	}
	a.wins, a.views, a.mem = nil, nil, nil
	return errors.Join(errs...)
}

// AllocShared returns n bytes of memory that collectives can read in place on every rank
// of this host: every rank calls it, in the same order relative to its other collective
// calls, with the same n (MPI_Win_allocate_shared; NCCL's ncclMemAlloc with a symmetric
// window). When every rank's send and receive buffers of an AllReduce, ReduceScatter,
// AllGather, Broadcast, Scatter or AllToAll (the buffers that peers read: see
// algos/direct) of at least shm.direct_min bytes lie in such memory (anywhere
// in it, and not necessarily at the same offset on every rank), the collective reads the
// peers' buffers directly (algorithm "direct", see algos/direct) unless the config names
// another algorithm for that call: one copy or reduce per byte instead of the ring's
// two through a shared ring buffer.
//
// The memory is shared only when every link of the communicator is shm (and
// shm.direct_min is not "off"); otherwise AllocShared returns ordinary memory and
// collectives on it run as on any other, so code that uses it runs unchanged over tcp.
// The memory is zeroed. Release it with FreeShared; Close releases what is left. It is
// a file in shm.dir for as long as the ranks take to map it, then only mappings: Close,
// a crash or SIGKILL leave nothing behind (a launcher's sweep, shm.RemoveSegments,
// removes the name of a rank killed in between).
func (c *Comm) AllocShared(ctx context.Context, n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("goccl: rank %d: AllocShared: %w: %d bytes (want at least 1)", c.rank, transport.ErrInvalid, n)
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	index := int(c.shareSeq.Add(1) - 1)
	dir, can := c.canShare()
	var own *shm.Window
	var ownErr error
	state := int64(shareNo)
	if can {
		if own, ownErr = shm.CreateWindow(dir, c.id, index, c.rank, n); ownErr == nil {
			state = shareOK
		} else {
			state = shareFailed
		}
	}
	shared, err := c.agreeShare(ctx, "create its window", index, n, state, ownErr)
	if err != nil || !shared {
		if own != nil {
			_ = own.Close()
		}
		if can {
			shm.RemoveWindows(dir, c.id, index, c.size) // ours, and any a failed peer left
		}
		if err != nil {
			return nil, err
		}
		a := &sharedAlloc{index: index, mem: make([]byte, n)}
		c.install(a, false)
		return a.mem, nil
	}
	a := &sharedAlloc{index: index, views: make([][]byte, c.size), wins: []*shm.Window{own}}
	a.mem = own.Bytes()
	a.views[c.rank] = a.mem
	state, ownErr = shareOK, nil
	for r := range c.size {
		if r == c.rank {
			continue
		}
		w, err := shm.OpenWindow(dir, c.id, index, r, n)
		if err != nil {
			state, ownErr = shareFailed, err
			break
		}
		a.wins = append(a.wins, w)
		a.views[r] = w.Bytes()
	}
	_, err = c.agreeShare(ctx, "map its peers' windows", index, n, state, ownErr)
	if err != nil {
		_ = a.close()
		shm.RemoveWindows(dir, c.id, index, c.size) // a peer that died may have left its own
		return nil, err
	}
	if err := own.Unlink(); err != nil { // every rank has mapped it
		// The peers have installed the allocation, so this rank must too; the name
		// stays for the launcher's sweep.
		c.log.Warn("AllocShared: cannot remove the window's name", "subsys", "INIT", "err", err)
	}
	// And every peer's name too: a peer killed before it removed its own leaves nothing.
	shm.RemoveWindows(dir, c.id, index, c.size)
	c.install(a, true)
	return a.mem, nil
}

// States a rank reports while the ranks agree on an allocation.
const (
	shareNo     = 0 // this communicator does not share memory (not every link is shm)
	shareOK     = 1
	shareFailed = 2
)

// agreeShare gathers every rank's state and size for allocation index and returns
// whether all ranks share it; an error, on every rank, when a rank failed or the sizes
// differ.
func (c *Comm) agreeShare(ctx context.Context, step string, index, n int, state int64, ownErr error) (bool, error) {
	mine := []int64{state, int64(n), int64(index)}
	all := make([]int64, 3*c.size)
	if err := c.AllGather(ctx, HostSlice(mine), HostSlice(all), 3, Int64); err != nil {
		return false, fmt.Errorf("goccl: rank %d: AllocShared #%d: %w", c.rank, index, err)
	}
	shared := true
	for r := range c.size {
		if all[3*r+1] != int64(n) {
			return false, fmt.Errorf("goccl: rank %d: AllocShared #%d: %w: rank %d asked for %d bytes, rank %d for %d (every rank passes the same size)",
				c.rank, index, transport.ErrMismatch, c.rank, n, r, all[3*r+1])
		}
		if all[3*r+2] != int64(index) {
			// Concurrent AllocShared calls on one communicator paired different calls.
			return false, fmt.Errorf("goccl: rank %d: AllocShared: %w: this rank's call #%d met rank %d's #%d (call AllocShared from one goroutine, in the same order on every rank)",
				c.rank, transport.ErrMismatch, index, r, all[3*r+2])
		}
		switch all[3*r] {
		case shareFailed:
			if r == c.rank {
				return false, fmt.Errorf("goccl: rank %d: AllocShared #%d of %d bytes: %w", c.rank, index, n, ownErr)
			}
			return false, fmt.Errorf("goccl: rank %d: AllocShared #%d of %d bytes: %w: rank %d could not %s (its error says why)",
				c.rank, index, n, transport.ErrPeer, r, step)
		case shareNo:
			shared = false
		}
	}
	return shared, nil
}

// canShare reports whether this rank may share memory with every peer, and where.
func (c *Comm) canShare() (string, bool) {
	if c.size < 2 || c.directMin < 0 {
		return "", false
	}
	for r, name := range c.linkNames {
		if r != c.rank && name != "shm" {
			return "", false
		}
	}
	return c.shmDir, true
}

func (c *Comm) install(a *sharedAlloc, shared bool) {
	c.execMu.Lock()
	defer c.execMu.Unlock()
	c.shared.allocs = append(c.shared.allocs, a)
	if shared {
		c.shared.live++
	}
}

// FreeShared releases memory from AllocShared. Every rank calls it for the memory of the
// same AllocShared call, in the same order relative to its collectives; it waits for the
// operations issued before it. b must be the slice AllocShared returned, and neither it
// nor anything sliced from it may be used afterwards.
func (c *Comm) FreeShared(ctx context.Context, b []byte) error {
	c.execMu.Lock()
	idx, pos := -1, -1
	for i, a := range c.shared.allocs {
		if len(b) == len(a.mem) && unsafe.SliceData(b) == unsafe.SliceData(a.mem) {
			idx, pos = a.index, i
		}
	}
	c.execMu.Unlock()
	mine := []int64{int64(idx)}
	all := make([]int64, c.size)
	if err := c.AllGather(ctx, HostSlice(mine), HostSlice(all), 1, Int64); err != nil {
		return fmt.Errorf("goccl: rank %d: FreeShared: %w", c.rank, err)
	}
	if idx < 0 {
		return fmt.Errorf("goccl: rank %d: FreeShared: %w: %d bytes that are not memory from this communicator's AllocShared (or were freed already)",
			c.rank, transport.ErrInvalid, len(b))
	}
	for r, x := range all {
		if x != int64(idx) {
			what := fmt.Sprintf("allocation #%d", x)
			if x < 0 {
				what = "memory that is not from AllocShared"
			}
			return fmt.Errorf("goccl: rank %d: FreeShared: %w: this rank frees allocation #%d, rank %d %s (every rank frees the memory of the same AllocShared call)",
				c.rank, transport.ErrMismatch, idx, r, what)
		}
	}
	c.execMu.Lock()
	defer c.execMu.Unlock()
	a := c.shared.allocs[pos]
	c.shared.allocs = append(c.shared.allocs[:pos], c.shared.allocs[pos+1:]...)
	if a.views != nil {
		c.shared.live--
	}
	if err := a.close(); err != nil {
		return fmt.Errorf("goccl: rank %d: FreeShared: %w", c.rank, err)
	}
	return nil
}

// closeShared unmaps whatever AllocShared memory is left; the communicator is closed.
func (c *Comm) closeShared() error {
	var errs []error
	for _, a := range c.shared.allocs {
		errs = append(errs, a.close())
	}
	c.shared = sharedMem{}
	return errors.Join(errs...)
}

// IsShared reports whether b lies in memory from AllocShared that every rank maps, so
// that collectives on it of at least shm.direct_min bytes read it in place.
func (c *Comm) IsShared(b []byte) bool {
	c.execMu.Lock()
	defer c.execMu.Unlock()
	_, _, ok := c.shared.locate(b)
	return ok
}

// DirectMin is the smallest collective (in nccl-tests' bytes) that reads shared memory
// in place when the config leaves the call to auto; -1 when shm.direct_min is "off".
func (c *Comm) DirectMin() int { return c.directMin }

// SharedAllocs, Locate and PeerView make opPeers an algos.Shared.
func (p *opPeers) SharedAllocs() int                { return p.c.shared.live }
func (p *opPeers) Locate(b []byte) (int, int, bool) { return p.c.shared.locate(b) }
func (p *opPeers) PeerView(r, alloc, off, n int) ([]byte, error) {
	return p.c.shared.view(r, alloc, off, n)
}

// locate is algos.Shared's Locate over the shared allocations.
func (s *sharedMem) locate(b []byte) (int, int, bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, a := range s.allocs {
		if a.views == nil {
			continue
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(a.mem)))
		if lo >= base && lo-base+uintptr(len(b)) <= uintptr(len(a.mem)) {
			return a.index, int(lo - base), true
		}
	}
	return 0, 0, false
}

// view is algos.Shared's PeerView.
func (s *sharedMem) view(r, alloc, off, n int) ([]byte, error) {
	for _, a := range s.allocs {
		if a.index != alloc || a.views == nil {
			continue
		}
		if r < 0 || r >= len(a.views) {
			break
		}
		v := a.views[r]
		if off < 0 || n < 0 || off+n > len(v) {
			return nil, fmt.Errorf("%w: rank %d's buffer [%d, %d) lies outside its %d-byte allocation #%d", transport.ErrProtocol, r, off, off+n, len(v), alloc)
		}
		return v[off : off+n : off+n], nil
	}
	return nil, fmt.Errorf("%w: rank %d names shared allocation #%d, which this rank does not have", transport.ErrProtocol, r, alloc)
}

// directAlgo is the registered direct algorithm, compared by value: cheaper on every
// call than its name.
var directAlgo algos.Algorithm = direct.Algorithm{}

// directFirst reports whether a collective of bytes that the config leaves to auto
// should try the direct algorithm first: shared memory exists, and the call is large
// enough to gain.
func (c *Comm) directFirst(k *call, bytes int) bool {
	if c.shared.live == 0 || c.directMin < 0 || bytes < c.directMin || !(direct.Algorithm{}).Supports(k.kind) {
		return false
	}
	return c.sel.Load().spec.Auto(k.kind, bytes)
}

var _ algos.Shared = (*opPeers)(nil)
