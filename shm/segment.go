//go:build linux

package shm

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/transport"
)

// Segment layout. One segment per linked pair (lo < hi): a 4 KiB header page, then one
// ring per direction. Direction 0 carries lo->hi, direction 1 hi->lo. Words that
// different processes write sit on different 64-byte cache lines.
const (
	segMagic    = 0x316d68736363_6f67 // "goccshm1", little endian
	segVersion  = 2
	headerBytes = 4096
	cacheLine   = 64

	hMagic      = 0    // uint64, written last by the creator
	hVersion    = 8    // uint32
	hHeader     = 12   // uint32: headerBytes
	hRingBytes  = 16   // uint64: bytes per direction
	hLo         = 24   // uint32
	hHi         = 28   // uint32
	hCommHash   = 32   // uint64: FNV-1a of the communicator id
	hCommLen    = 40   // uint32
	hCreatorPid = 44   // uint32
	hOpenerPid  = 48   // uint32, written by the opener before it attaches
	hAttach     = 64   // uint32: attachNone, attachOK or attachRejected (opener-owned line)
	hClosed     = 128  // uint32 per side, each on its own line: 1 once that side is gone
	hComm       = 256  // the communicator id itself, up to maxCommInHeader bytes
	hCtl        = 2048 // direction control blocks, ctlBytes each

	maxCommInHeader = 1024
	ctlBytes        = 512
)

// Attach states of the header's hAttach word.
const (
	attachNone     = 0
	attachOK       = 1
	attachRejected = 2
)

// segPrefixBase starts every segment name, so leftovers are easy to find.
const segPrefixBase = "goccl-shm-"

// segment is one mapped pair segment.
type segment struct {
	mem     []byte // exactly what Mmap returned: Munmap needs this slice
	path    string
	creator bool
	ring    int // bytes per direction
}

func (s *segment) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&s.mem[off])) }
func (s *segment) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

// closedWord is side's "gone" flag.
func (s *segment) closedWord(side int) *uint32 { return s.u32(hClosed + side*cacheLine) }

// dir returns the ring of direction d (0: lo->hi, 1: hi->lo).
func (s *segment) dir(d int) *ring {
	off := hCtl + d*ctlBytes
	data := s.mem[headerBytes+d*s.ring : headerBytes+(d+1)*s.ring : headerBytes+(d+1)*s.ring]
	return newRing(s.mem[off:off+ctlBytes:off+ctlBytes], data)
}

func segmentSize(ring int) int { return headerBytes + 2*ring }

// segPrefix is the name prefix of every segment of one communicator.
func segPrefix(commID string) string {
	h := fnv.New32a()
	h.Write([]byte(commID))
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, commID)
	if len(clean) > 64 {
		clean = clean[:64]
	}
	return fmt.Sprintf("%s%s-%08x-", segPrefixBase, clean, h.Sum32())
}

// segName names the segment of pair (lo, hi): deterministic, so a survivor can remove
// it by name when the creator dies before publishing it.
func segName(commID string, lo, hi int) string {
	return fmt.Sprintf("%s%d-%d", segPrefix(commID), lo, hi)
}

func commHash(commID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(commID))
	return h.Sum64()
}

// createSegment makes, sizes and maps a new segment and writes its header. The file's
// blocks are allocated up front, so a full directory fails here and not later with
// SIGBUS on first touch.
func createSegment(dir, name string, ringBytes int, commID string, lo, hi int) (*segment, error) {
	mem, path, err := createMapped(dir, name, "segment", segmentSize(ringBytes))
	if err != nil {
		return nil, err
	}
	s := &segment{mem: mem, path: path, creator: true, ring: ringBytes}
	*s.u32(hVersion) = segVersion
	*s.u32(hHeader) = headerBytes
	*s.u64(hRingBytes) = uint64(ringBytes)
	*s.u32(hLo) = uint32(lo)
	*s.u32(hHi) = uint32(hi)
	*s.u64(hCommHash) = commHash(commID)
	*s.u32(hCommLen) = uint32(len(commID))
	copy(mem[hComm:hComm+maxCommInHeader], commID)
	*s.u32(hCreatorPid) = uint32(os.Getpid())
	atomic.StoreUint64(s.u64(hMagic), segMagic) // publishes everything above
	return s, nil
}

// createMapped creates file name in dir (what names it in errors), reserves size bytes
// and maps them read-write and shared, every page touched (prefault). A leftover of a
// crashed run with the same communicator id is replaced: no live rank can own it,
// because this rank is the only creator of its names. On error nothing is left.
func createMapped(dir, name, what string, size int) ([]byte, string, error) {
	path := filepath.Join(dir, name)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		_ = unix.Unlink(path)
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	}
	if err != nil {
		return nil, "", fmt.Errorf("shm: create %s %s: %w", what, path, err)
	}
	defer unix.Close(fd)
	if err := allocate(fd, dir, what, size); err != nil {
		_ = unix.Unlink(path)
		return nil, "", fmt.Errorf("shm: create %s %s: %w", what, path, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		_ = unix.Unlink(path)
		return nil, "", fmt.Errorf("shm: map %s %s (%d bytes): %w", what, path, size, err)
	}
	prefault(mem)
	return mem, path, nil
}

// prefault reads one byte of every page of a mapping made with MAP_POPULATE, so that
// no message pays for a page's first touch. In a VM whose memory the host backs
// lazily (here a Firecracker guest) MAP_POPULATE alone leaves a first read of each
// page costing about 5 us, once per page and process; unpaid, that is 0.3 us more
// on each of the first 65536 small messages through a 4 MiB ring, the first 40-90
// ms of a job (BENCHMARKS.md, "Speed", 22). Paid here it is 10-12 ms per 8 MiB
// segment at Init, and where pages are backed already 25-50 us (a second read).
func prefault(mem []byte) {
	var x byte
	for i, step := 0, os.Getpagesize(); i < len(mem); i += step {
		x += mem[i]
	}
	prefaultSink.Add(uint32(x)) // keeps the reads from being optimised away
}

var prefaultSink atomic.Uint32

// allocate reserves size bytes for fd, falling back to ftruncate only where the file
// system cannot preallocate.
func allocate(fd int, dir, what string, size int) error {
	err := unix.Fallocate(fd, 0, 0, int64(size))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOSPC):
		var st unix.Statfs_t
		free := "unknown"
		if unix.Statfs(dir, &st) == nil {
			free = fmt.Sprintf("%d", st.Bavail*uint64(st.Bsize))
		}
		lower := "shm.ring_bytes"
		if what != "segment" {
			lower = "the size: AllocShared's, or shm.staging_bytes for the staging area"
		}
		return fmt.Errorf("%w: %s has %s bytes free, the %s needs %d (make the mount bigger or lower %s): %w",
			transport.ErrNotSupported, dir, free, what, size, lower, err)
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return unix.Ftruncate(fd, int64(size))
	}
	return err
}

// openSegment maps the segment a peer created and removes its name at once: both
// sides have it mapped now, so nothing is left behind whatever happens next.
func openSegment(dir, name string) (*segment, error) {
	path := filepath.Join(dir, name)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: open segment %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: stat segment %s: %w", path, err)
	}
	if st.Size < headerBytes+2*minRingBytes || st.Size > int64(segmentSize(maxRingBytes)) {
		return nil, fmt.Errorf("shm: segment %s: %w: size %d is not a segment size", path, transport.ErrProtocol, st.Size)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("shm: map segment %s (%d bytes): %w", path, st.Size, err)
	}
	if err := unix.Unlink(path); err != nil && !errors.Is(err, unix.ENOENT) {
		_ = unix.Munmap(mem)
		return nil, fmt.Errorf("shm: unlink segment %s: %w", path, err)
	}
	prefault(mem)
	return &segment{mem: mem, path: path}, nil
}

// validate is the opener's half of the handshake: the header must be this layout
// version, this communicator, this pair and the creator the peer's handle named.
func (s *segment) validate(commID string, lo, hi, creatorPid int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("shm: segment %s: %w: %s", s.path, transport.ErrProtocol, fmt.Sprintf(format, a...))
	}
	if m := atomic.LoadUint64(s.u64(hMagic)); m != segMagic {
		return bad("magic %#x, want %#x (not a goccl segment, or not initialised)", m, uint64(segMagic))
	}
	if v := *s.u32(hVersion); v != segVersion {
		return bad("layout version %d, this build speaks %d (mixed goccl versions)", v, segVersion)
	}
	ring := int(*s.u64(hRingBytes))
	if *s.u32(hHeader) != headerBytes || ring < minRingBytes || ring > maxRingBytes || segmentSize(ring) != len(s.mem) {
		return bad("header says %d-byte header and %d-byte rings but the file has %d bytes", *s.u32(hHeader), ring, len(s.mem))
	}
	n := int(*s.u32(hCommLen))
	if *s.u64(hCommHash) != commHash(commID) || n != len(commID) ||
		string(s.mem[hComm:hComm+min(n, maxCommInHeader)]) != commID[:min(n, maxCommInHeader)] {
		return bad("it belongs to communicator %q, not %q", s.mem[hComm:hComm+min(n, maxCommInHeader)], commID)
	}
	if l, h := int(*s.u32(hLo)), int(*s.u32(hHi)); l != lo || h != hi {
		return bad("it links ranks %d-%d, not %d-%d", l, h, lo, hi)
	}
	if p := int(*s.u32(hCreatorPid)); p != creatorPid {
		return bad("created by pid %d, but rank %d's handle names pid %d", p, lo, creatorPid)
	}
	s.ring = ring
	return nil
}

func (s *segment) unmap() {
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		s.mem = nil
	}
}

// unlink removes the segment's name if it is still there (best effort: the caller is
// already failing or closing, and a missing name is the normal case).
func (s *segment) unlink() { _ = unix.Unlink(s.path) }

// RemoveSegments deletes every segment name of communicator commID left in dir ("" for
// /dev/shm) and returns how many it removed. Links never leave names behind once both
// sides have mapped them; this is for a launcher cleaning up after ranks that were
// killed while linking. Removing a name does not disturb ranks that have it mapped.
func RemoveSegments(dir, commID string) (int, error) {
	if dir == "" {
		dir = defaultDir
	}
	// segPrefix only contains [A-Za-z0-9._-], so it needs no glob escaping.
	matches, err := filepath.Glob(filepath.Join(dir, segPrefix(commID)+"*"))
	if err != nil {
		return 0, fmt.Errorf("shm: list %s: %w", dir, err)
	}
	n := 0
	for _, m := range matches {
		if err := os.Remove(m); err == nil {
			n++
		} else if !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("shm: remove %s: %w", m, err)
		}
	}
	return n, nil
}
