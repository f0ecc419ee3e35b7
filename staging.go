package goccl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/staged"
	"github.com/goccl/goccl/internal/tune"
	"github.com/goccl/goccl/shm"
)

// stagingArea is the communicator's staging area for algos/staged: every rank's part, a
// shm window each rank creates and every other rank maps, set up by the first call that
// needs it. Guarded by execMu: collectives set it up and read it while they run.
type stagingArea struct {
	state atomic.Int32 // stagingUnset, stagingOK or stagingOff: the same on every rank (atomic: Comm.Algo reads it)
	parts [][]byte     // by rank, as this rank maps them
	wins  []*shm.Window
}

const (
	stagingUnset int32 = iota
	stagingOK
	stagingOff // no area, on every rank: staged calls fall back at once, with no message
)

// stagingIndex names the staging area's windows apart from AllocShared's, which count
// from 0.
const stagingIndex = 1 << 30

// Handshake phases of the set-up (algos.TagStaged's phases 1-3 are the algorithm's).
const (
	phaseStagingCreated = 8 // every rank created its part (or could not)
	phaseStagingMapped  = 9 // every rank mapped every part (or could not)
)

// Staging makes opPeers an algos.Stager.
func (p *opPeers) Staging(ctx context.Context) ([][]byte, error) { return p.c.stagingParts(ctx, p) }

var _ algos.Stager = (*opPeers)(nil)

// stagingParts returns the staging area's parts, setting the area up on first use: every
// rank gets here in the same call (the staged algorithm runs on every rank or on none),
// creates its part, and the ranks tell each other, by one byte to every peer, whether
// they could; then they map each other's parts and tell each other again. A rank that
// cannot (a link that is not shm, a full shm.dir) makes every rank give up alike, with
// algos.ErrNoStaging, now and for every later call. A dead peer is an error, as in any
// collective.
func (c *Comm) stagingParts(ctx context.Context, p algos.Peers) ([][]byte, error) {
	s := &c.staging
	switch s.state.Load() {
	case stagingOK:
		return s.parts, nil
	case stagingOff:
		return nil, algos.ErrNoStaging
	}
	dir, can := c.shmDir, c.canStage()
	var own *shm.Window
	var why error
	if can {
		if own, why = shm.CreateWindow(dir, c.id, stagingIndex, c.rank, c.stagingBytes); why != nil {
			c.log.Warn("staging area: cannot create this rank's part; the staged algorithm is off", "subsys", "INIT", "err", why)
		}
	}
	ok, err := c.agreeStaging(ctx, p, phaseStagingCreated, own != nil)
	if err != nil || !ok {
		if own != nil {
			_ = own.Close()
		}
		shm.RemoveWindows(dir, c.id, stagingIndex, c.size) // ours, and any a dead peer left
		if err != nil {
			return nil, err
		}
		s.state.Store(stagingOff)
		return nil, algos.ErrNoStaging
	}
	wins := []*shm.Window{own}
	parts := make([][]byte, c.size)
	parts[c.rank] = own.Bytes()
	mapped := true
	for r := range c.size {
		if r == c.rank {
			continue
		}
		w, err := shm.OpenWindow(dir, c.id, stagingIndex, r, c.stagingBytes)
		if err != nil {
			c.log.Warn("staging area: cannot map a peer's part; the staged algorithm is off", "subsys", "INIT", "peer", r, "err", err)
			mapped = false
			break
		}
		wins = append(wins, w)
		parts[r] = w.Bytes()
	}
	ok, err = c.agreeStaging(ctx, p, phaseStagingMapped, mapped)
	if err != nil || !ok {
		for _, w := range wins {
			_ = w.Close()
		}
		shm.RemoveWindows(dir, c.id, stagingIndex, c.size)
		if err != nil {
			return nil, err
		}
		s.state.Store(stagingOff)
		return nil, algos.ErrNoStaging
	}
	// Every rank has mapped every part: remove every name, not only this rank's, so that
	// a rank killed right now leaves nothing behind either.
	if err := own.Unlink(); err != nil {
		c.log.Warn("staging area: cannot remove its name", "subsys", "INIT", "err", err)
	}
	shm.RemoveWindows(dir, c.id, stagingIndex, c.size)
	s.parts, s.wins = parts, wins
	s.state.Store(stagingOK)
	c.log.Debug("staging area", "subsys", "INIT", "bytes_per_rank", c.stagingBytes, "dir", dir)
	return parts, nil
}

// agreeStaging tells every peer whether this rank succeeded at a step of the set-up and
// returns whether every rank did.
func (c *Comm) agreeStaging(ctx context.Context, p algos.Peers, phase uint8, mine bool) (bool, error) {
	tag := algos.Tag(algos.TagStaged, phase, 0)
	msg := []byte{0}
	if mine {
		msg[0] = 1
	}
	for i := 1; i < c.size; i++ {
		if err := algos.Send(ctx, p, (c.rank+i)%c.size, tag, msg); err != nil {
			return false, fmt.Errorf("staging area: %w", err)
		}
	}
	all := mine
	var in [1]byte
	for i := 1; i < c.size; i++ {
		if err := algos.Recv(ctx, p, (c.rank-i+c.size)%c.size, tag, in[:]); err != nil {
			return false, fmt.Errorf("staging area: %w", err)
		}
		all = all && in[0] == 1
	}
	return all, nil
}

// canStage reports whether this rank can have a staging area: every link is shm and
// shm.staged_min is not "off".
func (c *Comm) canStage() bool {
	if c.size < 2 || c.stagedMin < 0 {
		return false
	}
	for r, name := range c.linkNames {
		if r != c.rank && name != "shm" {
			return false
		}
	}
	return true
}

// closeStaging unmaps the staging area; the communicator is closed.
func (c *Comm) closeStaging() error {
	var errs []error
	for _, w := range c.staging.wins {
		errs = append(errs, w.Close())
	}
	c.staging.parts, c.staging.wins = nil, nil
	c.staging.state.Store(stagingOff)
	return errors.Join(errs...)
}

// stagedAlgo is the registered staged algorithm, compared by value.
var stagedAlgo algos.Algorithm = staged.Algorithm{}

// stagedFirst reports whether a call of kind and bytes that the config leaves to auto
// should try the staged algorithm first. It depends only on what every rank agrees on
// (the group's ability, agreed at Init, and the area's state), so every rank decides
// alike.
func (c *Comm) stagedFirst(kind Kind, bytes int) bool {
	if !c.stageable || c.staging.state.Load() == stagingOff {
		return false
	}
	switch kind {
	case KindAllReduce:
		if bytes < c.stagedMin || bytes > c.stagedMax {
			return false
		}
	case KindAllGather, KindReduceScatter:
		if !shm.StagedGatherFor(c.size, bytes, c.streams) {
			return false
		}
	case KindBroadcast:
		if bytes < shm.StagedBroadcastMinFor(c.size, c.streams) {
			return false
		}
	default:
		return false
	}
	return c.sel.Load().spec.Auto(kind, bytes)
}

// stagedRange is a tune file's staged range as shm.staged_min and shm.staged_max.
func stagedRange(r tune.StagedRange) (lo, hi int) {
	switch {
	case r.Off: // AllReduce never stages; AllGather, ReduceScatter and Broadcast still may
		return math.MaxInt, math.MaxInt
	case r.MaxBytes == 0:
		return r.MinBytes, math.MaxInt
	}
	return r.MinBytes, r.MaxBytes
}

// runStaged runs the call a with the staged algorithm and reports whether it ran: false,
// with no error, when the group has no staging area (every rank alike), and the caller
// runs another algorithm.
func (c *Comm) runStaged(ctx context.Context, p algos.Peers, a *algos.Args) (bool, error) {
	err := stagedAlgo.Run(ctx, p, a)
	if staged.Unavailable(err) {
		return false, nil
	}
	return true, err
}
