package nccl

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/transport"
)

// Name is the registry name of this transport.
const Name = "nccl"

func init() {
	transport.Register(Transport{})
	transport.RegisterStager(defaultStager)
}

// Transport moves messages with NCCL point-to-point calls and runs whole collectives
// natively through transport.Offloader. The zero value is ready to use.
type Transport struct{}

// Name returns "nccl".
func (Transport) Name() string { return Name }

// handleVersion is the version of the endpoint handle format.
const handleVersion = 1

// endpoint is one rank's NCCL state: the loaded libraries, its GPU, the communicator
// over all ranks (for offloaded collectives) and its device scratch memory.
type endpoint struct {
	local transport.Local
	lib   *Lib
	rt    *cuda.Runtime
	dev   cuda.Device
	cfg   Config
	p2p   p2pMode
	busID string

	mainMu  sync.Mutex
	main    *comm // over all ranks, for Offload; created by the first one
	mainErr error

	mu     sync.Mutex
	closed bool
	conns  map[*conn]struct{}

	scratch scratch // device memory for offloads of host buffers and barriers
}

type p2pMode int

const (
	p2pDevice p2pMode = iota // stage Conn messages through device memory
	p2pPinned                // hand NCCL pinned host memory directly
)

// Open loads libnccl and libcudart (Params "nccl.lib", "cuda.lib", else the search in
// LibrarySpec and cuda.LibrarySpec), picks this rank's GPU (Params "nccl.device", else
// "local_rank" (or Rank) modulo the device count) and publishes whether all that
// worked, so that a rank without NCCL makes its peers fail at once instead of waiting
// in ncclCommInitRank. Open does not wait for other ranks: the communicator over all
// ranks is created by the first offloaded collective (every rank calls it), and each
// link's communicator by its first message.
func (Transport) Open(ctx context.Context, l transport.Local) (transport.Endpoint, error) {
	if l.World < 1 || l.Rank < 0 || l.Rank >= l.World {
		return nil, fmt.Errorf("nccl: %w: rank %d outside world of %d", transport.ErrInvalid, l.Rank, l.World)
	}
	if l.Store == nil && l.World > 1 {
		return nil, fmt.Errorf("nccl: %w: Open needs a Store for %d ranks", transport.ErrInvalid, l.World)
	}
	e, err := prepare(l)
	if l.World > 1 {
		status := "ok"
		if err != nil {
			status = "error: " + err.Error()
		}
		if serr := l.Store.Set(ctx, statusKey(l.Rank), []byte(status)); serr != nil && err == nil {
			err = fmt.Errorf("nccl: publish status: %w", serr)
		}
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// mainComm returns the communicator over all ranks, creating it on first use: rank 0
// makes the unique id and shares it through the store.
func (e *endpoint) mainComm(ctx context.Context) (*comm, error) {
	e.mainMu.Lock()
	defer e.mainMu.Unlock()
	if e.main != nil || e.mainErr != nil {
		return e.main, e.mainErr
	}
	ctx, cancel := e.setupCtx(ctx)
	defer cancel()
	err := e.checkPeers(ctx, -1)
	var id UniqueID
	if err == nil {
		id, err = e.sharedID(ctx, "nccl/uid", 0, e.local.Rank)
	}
	if err == nil {
		e.main, err = e.lib.newComm(ctx, e.dev, e.local.World, e.local.Rank, id, e.cfg)
	}
	if err != nil {
		e.mainErr = err
	}
	return e.main, err
}

// setupCtx bounds communicator set-up by Local.Timeout as well as ctx.
func (e *endpoint) setupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.local.Timeout > 0 {
		return context.WithTimeout(ctx, e.local.Timeout)
	}
	return context.WithCancel(ctx)
}

func statusKey(rank int) string { return "nccl/status/" + strconv.Itoa(rank) }

// prepare loads the libraries and selects the device.
func prepare(l transport.Local) (*endpoint, error) {
	if err := (Transport{}).CheckParams(l.Params); err != nil {
		return nil, err
	}
	lib, err := LoadLibrary(l.Params.String("nccl.lib", ""))
	if err != nil {
		return nil, err
	}
	rt, err := cuda.Load(l.Params.String("cuda.lib", ""))
	if err != nil {
		return nil, fmt.Errorf("nccl: %w", err)
	}
	n, err := rt.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("nccl: %w: no usable CUDA device: %w", transport.ErrNotSupported, err)
	}
	setHostID(l.Host)
	// LOCAL_RANK picks the GPU, wrapping when ranks outnumber GPUs (several ranks on one
	// GPU need NCCL_MULTI_RANK_GPU_ENABLE=1 on NCCL 2.30+); nccl.device is taken as given.
	ord := l.Params.Int("nccl.device", l.Params.Int("local_rank", l.Rank)%n)
	dev, err := rt.Device(ord)
	if err != nil {
		return nil, fmt.Errorf("nccl: rank %d: %w (set Params nccl.device)", l.Rank, err)
	}
	e := &endpoint{local: l, lib: lib, rt: rt, dev: dev, cfg: configFromParams(l.Params), conns: map[*conn]struct{}{}}
	switch m := l.Params.String("nccl.p2p_buffer", "device"); m {
	case "device":
	case "pinned":
		e.p2p = p2pPinned
	default:
		return nil, fmt.Errorf("nccl: %w: Params nccl.p2p_buffer=%q (valid: device, pinned)", transport.ErrInvalid, m)
	}
	e.busID, _ = dev.PCIBusID()
	return e, nil
}

// setHostID makes NCCL see the hosts goccl sees. A rank that poses as a host of its own
// (GOCCL_HOST_ID, `goccl run --host-id`, the netns tests), that is whose host identity is
// not the machine's hostname, gets NCCL_HOSTID set to that identity before NCCL's first
// communicator. NCCL's host hash, which otherwise comes from the hostname, then splits
// the ranks as goccl does: between such hosts NCCL uses its network transport, as
// between machines, instead of finding two ranks on one GPU and refusing them
// ("Duplicate GPU detected"). An NCCL_HOSTID the user set is kept. The variable is
// process-wide, so goroutine ranks of one process share the first one's identity.
func setHostID(host string) {
	if host == "" || os.Getenv("NCCL_HOSTID") != "" {
		return
	}
	if h, err := os.Hostname(); err == nil && h == host {
		return
	}
	os.Setenv("NCCL_HOSTID", host)
}

// checkPeers waits for the load status of rank only (or of every rank when only < 0)
// and fails, naming the rank, if it could not load NCCL.
func (e *endpoint) checkPeers(ctx context.Context, only int) error {
	l := e.local
	if l.World == 1 {
		return nil
	}
	for r := 0; r < l.World; r++ {
		if r == l.Rank || (only >= 0 && r != only) {
			continue
		}
		v, err := l.Store.Get(ctx, statusKey(r))
		if err != nil {
			return fmt.Errorf("nccl: waiting for rank %d to load NCCL: %w", r, err)
		}
		if s := string(v); s != "ok" {
			return &transport.PeerError{Peer: r, Err: fmt.Errorf("nccl: rank %d cannot run NCCL: %s", r, strings.TrimPrefix(s, "error: "))}
		}
	}
	return nil
}

// sharedID returns the unique id stored under key, created by rank creator.
func (e *endpoint) sharedID(ctx context.Context, key string, creator, me int) (UniqueID, error) {
	var id UniqueID
	if e.local.Store == nil { // single rank without a store
		return e.lib.UniqueID()
	}
	if me == creator {
		var err error
		if id, err = e.lib.UniqueID(); err != nil {
			return id, fmt.Errorf("nccl: %w", err)
		}
		if err := e.local.Store.Set(ctx, key, id[:]); err != nil {
			return id, fmt.Errorf("nccl: publish %s: %w", key, err)
		}
		return id, nil
	}
	v, err := e.local.Store.Get(ctx, key)
	if err != nil {
		return id, fmt.Errorf("nccl: wait for %s from rank %d: %w", key, creator, err)
	}
	if len(v) != UniqueIDBytes {
		return id, fmt.Errorf("nccl: %w: %s is %d bytes, want %d", transport.ErrProtocol, key, len(v), UniqueIDBytes)
	}
	copy(id[:], v)
	return id, nil
}

// Handle names this endpoint: format version, communicator id, rank, device and its PCI
// bus id (so tools can see which GPU a rank uses).
func (e *endpoint) Handle() []byte {
	return fmt.Appendf(nil, "nccl/%d/%s/%d/%d/%s", handleVersion, e.local.CommID, e.local.Rank, e.dev.Ordinal(), e.busID)
}

type peerHandle struct {
	comm      string
	rank, dev int
	busID     string
}

func parseHandle(h []byte) (peerHandle, error) {
	f := strings.Split(string(h), "/")
	// The communicator id may itself contain '/', so parse the fixed fields from both ends.
	if len(f) < 6 || f[0] != "nccl" {
		return peerHandle{}, fmt.Errorf("nccl: %w: not an nccl handle: %q", transport.ErrProtocol, h)
	}
	if f[1] != strconv.Itoa(handleVersion) {
		return peerHandle{}, fmt.Errorf("nccl: %w: handle version %s, this build speaks %d", transport.ErrProtocol, f[1], handleVersion)
	}
	n := len(f)
	rank, err1 := strconv.Atoi(f[n-3])
	dev, err2 := strconv.Atoi(f[n-2])
	if err1 != nil || err2 != nil {
		return peerHandle{}, fmt.Errorf("nccl: %w: malformed handle %q", transport.ErrProtocol, h)
	}
	return peerHandle{comm: strings.Join(f[2:n-3], "/"), rank: rank, dev: dev, busID: f[n-1]}, nil
}

// CanConnect accepts any peer whose nccl endpoint belongs to the same communicator:
// NCCL itself picks NVLink, PCIe, shared memory or the network between them.
func (e *endpoint) CanConnect(p transport.PeerInfo) error {
	ph, err := parseHandle(p.Handle)
	if err != nil {
		return err
	}
	if ph.comm != e.local.CommID || ph.rank != p.Rank {
		return fmt.Errorf("nccl: %w: rank %d's handle is for communicator %q rank %d, want %q rank %d",
			transport.ErrProtocol, p.Rank, ph.comm, ph.rank, e.local.CommID, p.Rank)
	}
	return nil
}

// Connect returns the link to peer. It does not talk to the peer: each direction gets
// its own two-rank communicator, created on first use by the sender (see conn).
func (e *endpoint) Connect(ctx context.Context, p transport.PeerInfo) (transport.Conn, error) {
	if err := e.CanConnect(p); err != nil {
		return nil, err
	}
	if p.Rank == e.local.Rank || p.Rank < 0 || p.Rank >= e.local.World {
		return nil, fmt.Errorf("nccl: %w: rank %d cannot link to rank %d (world %d)", transport.ErrInvalid, e.local.Rank, p.Rank, e.local.World)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("nccl: connect to rank %d: %w", p.Rank, transport.ErrClosed)
	}
	c := &conn{e: e, peer: p.Rank, host: p.Host}
	c.eager.quit = make(chan struct{})
	c.out.dir, c.in.dir = dirSend, dirRecv
	e.conns[c] = struct{}{}
	return c, nil
}

// Close aborts or destroys the communicators and frees device memory.
func (e *endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	conns := make([]*conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	e.mainMu.Lock()
	if e.main != nil {
		e.main.close(e.closeTimeout())
	}
	e.mainMu.Unlock()
	e.scratch.free(e.dev)
	return nil
}

func (e *endpoint) closeTimeout() time.Duration {
	if e.local.Timeout > 0 {
		return e.local.Timeout
	}
	return 10 * time.Second
}

func (e *endpoint) forget(c *conn) {
	e.mu.Lock()
	delete(e.conns, c)
	e.mu.Unlock()
}

// Describe is a one-line description for logs.
func (e *endpoint) Describe() string {
	return fmt.Sprintf("nccl %s (%s) rank %d on cuda device %d [%s]", VersionString(e.lib.Version()), e.lib.Path(),
		e.local.Rank, e.dev.Ordinal(), e.busID)
}

// scratch is growable device memory.
type scratch struct {
	mu  sync.Mutex
	ptr uintptr
	n   int
}

// get returns at least n bytes (callers hold the endpoint's serialization).
func (s *scratch) get(dev cuda.Device, n int) (uintptr, error) {
	if n <= s.n && s.ptr != 0 {
		return s.ptr, nil
	}
	if s.ptr != 0 {
		_ = dev.Free(s.ptr)
		s.ptr, s.n = 0, 0
	}
	p, err := dev.Malloc(max(n, 256))
	if err != nil {
		return 0, err
	}
	s.ptr, s.n = p, max(n, 256)
	return p, nil
}

func (s *scratch) free(dev cuda.Device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr != 0 {
		_ = dev.Free(s.ptr)
		s.ptr, s.n = 0, 0
	}
}
