//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/transport"
)

// livenessEvery is how often a waiting rank checks that its peer process still runs
// (and how long one futex sleep lasts): a SIGKILLed peer becomes an error within a few
// of these, and an idle rank wakes 200 times a second at most.
const livenessEvery = 5 * time.Millisecond

// pureSpin is how long a waiting rank polls without yielding before it starts to
// yield between polls (see conn.await): about one cross-core cache-line round trip
// plus the peer's work for a small message.
const pureSpin = 2 * time.Microsecond

// pollPause is how many PAUSE instructions a purely spinning rank runs between two polls
// (about 30 ns here). The word it polls sits in the line the peer is about to write;
// a poll every few nanoseconds pulls that line back between the writer's stores, so
// the message took longer to land: 2 pauses made the raw 8-byte exchange of two
// processes 5-12 % faster (0.40-0.46 us against 0.45-0.52, alternating in one run),
// 16 made it 40 % slower (BENCHMARKS.md, "Speed", 15).
const pollPause = 2

// yieldGosched is how many yielding polls a rank with one P, waiting on another
// process, makes per runtime.Gosched (see conn.await).
const yieldGosched = 4

type endpoint struct {
	local transport.Local
	opts  Options
	me    handle
	log   *slog.Logger
	links atomic.Int32 // open links, a lower bound on the ranks of this host
}

func openEndpoint(_ context.Context, l transport.Local, o Options) (transport.Endpoint, error) {
	machine, err := machineID(o.Dir)
	if err != nil {
		return nil, err
	}
	if o.SingleCopy != SingleCopyOff {
		allowPtrace()
	}
	log := l.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	me := handle{Magic: handleMagic, Version: handleVersion, Pid: os.Getpid(), UID: os.Getuid(), Machine: machine}
	return &endpoint{local: l, opts: o, me: me, log: log}, nil
}

// machineID names the memory and pid space this process lives in: the kernel boot,
// the segment directory's file system and the pid namespace.
func machineID(dir string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", fmt.Errorf("shm: segment directory %s: %w: %w", dir, transport.ErrNotSupported, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", fmt.Errorf("shm: segment directory %s: %w: not a directory", dir, transport.ErrNotSupported)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	pidns, _ := os.Readlink("/proc/self/ns/pid")
	return fmt.Sprintf("%s/%x:%x/%s", strings.TrimSpace(string(boot)), st.Dev, st.Ino, pidns), nil
}

// Handle carries this process's pid, uid and machine identity (JSON).
func (e *endpoint) Handle() []byte { return e.me.encode() }

// CanConnect is nil when peer is on this host (same host identity from the rendezvous)
// and shares this kernel, segment directory, pid namespace and user.
func (e *endpoint) CanConnect(peer transport.PeerInfo) error {
	return canConnect(e.local.Rank, e.local.Host, e.me, peer)
}

// Close releases nothing: links stay usable until they are closed themselves.
func (e *endpoint) Close() error { return nil }

// Connect links this rank and peer through one segment. The lower rank creates it,
// publishes its name in the store and returns at once, so no order of Connect calls
// across ranks can deadlock; the higher rank waits for the name, maps the segment,
// removes its name, checks the header (layout version, communicator, ranks, creator
// pid) and marks it attached. The creator checks the attacher's pid the first time it
// waits for it.
func (e *endpoint) Connect(ctx context.Context, peer transport.PeerInfo) (transport.Conn, error) {
	self := e.local.Rank
	if peer.Rank == self || peer.Rank < 0 || peer.Rank >= e.local.World {
		return nil, fmt.Errorf("shm: rank %d: %w: cannot link to rank %d (want another rank in 0..%d)",
			self, transport.ErrInvalid, peer.Rank, e.local.World-1)
	}
	if err := e.CanConnect(peer); err != nil {
		return nil, err
	}
	h, _ := decodeHandle(peer.Handle) // CanConnect checked it
	if e.local.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.local.Timeout)
		defer cancel()
	}
	lo, hi := min(self, peer.Rank), max(self, peer.Rank)
	name := segName(e.local.CommID, lo, hi)
	key := fmt.Sprintf("shm/%d-%d/segment", lo, hi)
	var (
		seg *segment
		err error
	)
	if self == lo {
		seg, err = e.create(ctx, name, key, lo, hi)
	} else {
		seg, err = e.attach(ctx, name, key, lo, hi, peer.Rank, peer.Host, h.Pid)
	}
	if err != nil {
		return nil, err
	}
	c := newConn(e, seg, peer, h.Pid)
	e.log.Debug("shm link", "peer", peer.Rank, "link", c.Describe())
	return c, nil
}

func (e *endpoint) create(ctx context.Context, name, key string, lo, hi int) (*segment, error) {
	seg, err := createSegment(e.opts.Dir, name, e.opts.RingBytes, e.local.CommID, lo, hi)
	if err != nil {
		return nil, err
	}
	if err := seg.sealCreator(e.local.AuthToken, e.local.CommID, lo, hi); err != nil {
		seg.unlink()
		seg.unmap()
		return nil, err
	}
	if err := e.local.Store.Set(ctx, key, []byte(name)); err != nil {
		seg.unlink()
		seg.unmap()
		return nil, fmt.Errorf("shm: rank %d: publish segment for rank %d: %w", lo, hi, err)
	}
	return seg, nil
}

func (e *endpoint) attach(ctx context.Context, name, key string, lo, hi, peer int, host string, pid int) (*segment, error) {
	// Wait for the creator's name, but stop as soon as the creator's process is gone.
	w := watchPid(pid)
	gctx, cancel := context.WithCancelCause(ctx)
	watching := make(chan struct{})
	defer func() { // stop the watcher before its pidfd is closed
		cancel(nil)
		<-watching
		w.close()
	}()
	dead := &transport.PeerError{Peer: peer, Host: host,
		Err: fmt.Errorf("shm: process %d exited before it created the segment: %w", pid, transport.ErrClosed)}
	go func() {
		defer close(watching)
		t := time.NewTicker(livenessEvery)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return
			case <-t.C:
				if !w.alive() {
					cancel(dead)
					return
				}
			}
		}
	}()
	v, err := e.local.Store.Get(gctx, key)
	if err != nil {
		if errors.Is(context.Cause(gctx), dead) {
			// The creator may have made the file and died before publishing it.
			_ = unix.Unlink(e.opts.Dir + "/" + name)
			return nil, dead
		}
		return nil, fmt.Errorf("shm: rank %d: waiting for rank %d's segment: %w", hi, lo, ctxErr(ctx, err))
	}
	if string(v) != name {
		return nil, fmt.Errorf("shm: rank %d: %w: rank %d published segment %q, want %q", hi, transport.ErrProtocol, lo, v, name)
	}
	seg, err := openSegment(e.opts.Dir, name)
	if err != nil {
		return nil, err
	}
	err = seg.validate(e.local.CommID, lo, hi, pid)
	if err == nil {
		err = seg.checkCreator(e.local.AuthToken, e.local.CommID, lo, hi, os.Getpid())
	}
	if err != nil {
		atomic.StoreUint32(seg.u32(hAttach), attachRejected)
		futexWake(seg.u32(hAttach))
		seg.unmap()
		return nil, err
	}
	atomic.StoreUint32(seg.u32(hOpenerPid), uint32(os.Getpid()))
	atomic.StoreUint32(seg.u32(hAttach), attachOK)
	_ = e.local.Store.Delete(ctx, key)
	return seg, nil
}

// ctxErr maps a context error to transport.ErrTimeout for deadlines, keeping the
// original in the chain.
func ctxErr(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded {
		if !errors.Is(err, transport.ErrTimeout) {
			return fmt.Errorf("%w: %w", transport.ErrTimeout, err)
		}
	}
	return err
}
