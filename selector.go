package goccl

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/goccl/goccl/algos"
	_ "github.com/goccl/goccl/algos/hier" // the built-in algorithms register themselves
	_ "github.com/goccl/goccl/algos/naive"
	_ "github.com/goccl/goccl/algos/rd"
	_ "github.com/goccl/goccl/algos/ring"
	"github.com/goccl/goccl/algos/staged"
	_ "github.com/goccl/goccl/algos/tree"
	"github.com/goccl/goccl/internal/tune"
	"github.com/goccl/goccl/shm"
	"github.com/goccl/goccl/transport"
)

// offloadAlgo is the name that routes a collective to the transport's native
// implementation (NCCL's own collectives).
const offloadAlgo = "nccl"

// offloadMarker makes "nccl" a valid algorithm name; the communicator never calls Run
// on it, it hands the call to the transport's Offloader instead.
type offloadMarker struct{}

func (offloadMarker) Name() string                   { return offloadAlgo }
func (offloadMarker) Supports(k transport.Kind) bool { return true }
func (offloadMarker) Run(context.Context, algos.Peers, *algos.Args) error {
	return fmt.Errorf("goccl: %w: algorithm nccl runs only through the nccl transport's offload", transport.ErrNotSupported)
}

func init() { algos.Register(offloadMarker{}) }

// selector holds a communicator's parsed algorithm spec and cost model.
type selector struct {
	spec  *algos.Spec
	model algos.CostModel
	// picks caches the choice (and its reason) per call shape. A plain map under a read
	// lock: sync.Map would box every key into an interface, one allocation per call.
	mu    sync.RWMutex
	picks map[pickKey]pickResult
	last  atomic.Pointer[lastPick] // the latest pick: loops repeat one shape, and this skips the map's hash
}

type lastPick struct {
	k pickKey
	r pickResult
}

type pickKey struct {
	kind         Kind
	bytes, world int
}

type pickResult struct {
	a   algos.Algorithm
	why string
}

// maxPicks bounds the cache; sweeps over many sizes fall back to resolving each call.
const maxPicks = 4096

func newSelector(spec string) (*selector, error) {
	sp, err := algos.ParseSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("goccl: algo %q: %w", spec, err)
	}
	return &selector{spec: sp, model: algos.TCPModel}, nil
}

// setModel builds the cost model from the links and the hosts (tune.ModelFor: shm's
// model inside a host, tcp's between hosts, the host layout when ranks span hosts, the
// host's cores). tuned holds calibrated models by transport (`goccl tune`,
// Config.TuneFile); a transport it does not cover keeps the built-in model. staging is
// each rank's part of the staging area (shm.staging_bytes), which prices algos/staged.
func (s *selector) setModel(linkNames, hosts []string, self, chunk, staging int, tuned map[string]algos.CostModel) {
	m := tune.ModelFor(linkNames, hosts, self, chunk, tuned)
	m.StagingBytes = staging
	s.model = m
	s.mu.Lock()
	s.picks = nil
	s.mu.Unlock()
	s.last.Store(nil)
}

// pick returns the algorithm for one call and why; nil with no error means "offload it".
func (s *selector) pick(kind Kind, bytes, world int, off transport.Offloader) (algos.Algorithm, string, error) {
	k := pickKey{kind, bytes, world}
	var a algos.Algorithm
	var why string
	var r pickResult
	ok := false
	if l := s.last.Load(); l != nil && l.k == k {
		r, ok = l.r, true
	} else {
		s.mu.RLock()
		r, ok = s.picks[k]
		s.mu.RUnlock()
		if ok {
			s.last.Store(&lastPick{k, r})
		}
	}
	if ok {
		a, why = r.a, r.why
	} else {
		var err error
		if a, why, err = s.spec.Resolve(kind, bytes, world, s.model); err != nil {
			return nil, "", err
		}
		s.mu.Lock()
		if s.picks == nil {
			s.picks = make(map[pickKey]pickResult)
		}
		if len(s.picks) < maxPicks {
			s.picks[k] = pickResult{a, why}
		}
		s.mu.Unlock()
	}
	if a.Name() != offloadAlgo {
		return a, why, nil
	}
	if off == nil || !off.Offloads(kind) {
		return nil, "", fmt.Errorf("%w: algorithm nccl needs the nccl transport on every link (and a build of NCCL "+
			"that implements %s); choose ring, tree or naive for this communicator", transport.ErrNotSupported, kind)
	}
	return nil, "nccl (offload)", nil
}

// CostModel is the model auto prices algorithms with on this communicator: the built-in
// or tuned one of its links, with the eager size and chunk the ranks agreed at Init.
func (c *Comm) CostModel() algos.CostModel { return c.sel.Load().model }

// Algo names the algorithm this communicator would run for kind on a call of bytes
// (counted as nccl-tests' size column), with the reason. With algo_tune online, an
// AllReduce whose size class the ranks have agreed on reports that choice and the
// figures it was made on (algotune.go).
func (c *Comm) Algo(kind Kind, bytes int) (string, string) {
	a, why, err := c.sel.Load().pick(kind, bytes, c.size, c.offload)
	switch {
	case err != nil:
		return "", err.Error()
	case a == nil:
		return offloadAlgo, why
	case kind == KindAllReduce && c.sel.Load().spec.Auto(kind, bytes):
		if t, why := c.algoAgreed(bytes); t != nil {
			return t.Name(), why
		}
	}
	switch {
	case (kind != KindAllReduce || bytes > algos.SmallExchangeMax) && c.stagedFirst(kind, bytes): // as doCollective decides
		switch kind {
		case KindBroadcast:
			return staged.Name, fmt.Sprintf("staged (auto: ordinary buffers of at least shm.StagedBroadcastMinFor(%d) = %d bytes, every link shm; else %s)", c.size, shm.StagedBroadcastMinFor(c.size, c.streams), why)
		case KindAllGather, KindReduceScatter:
			return staged.Name, fmt.Sprintf("staged (auto: ordinary buffers, every link shm, shm.StagedGatherFor(%d ranks, %d bytes, stream %t); else %s)", c.size, bytes, c.streams, why)
		}
		bound := ""
		if c.stagedMax < math.MaxInt {
			bound = fmt.Sprintf(" and at most shm.staged_max = %d", c.stagedMax)
		}
		return staged.Name, fmt.Sprintf("staged (auto: ordinary buffers of at least shm.staged_min = %d bytes%s, every link shm; else %s)", c.stagedMin, bound, why)
	}
	return a.Name(), why
}

// SetAlgo changes the algorithm spec; every rank must make the same change at the same
// point in its sequence of operations.
func (c *Comm) SetAlgo(spec string) error {
	sel, err := newSelector(spec)
	if err != nil {
		return err
	}
	return c.submit(&Work{ctx: context.Background(), opSpec: opSpec{ext: &setAlgo{spec: spec, sel: sel}}}).Wait(context.Background())
}

// setAlgo is SetAlgo's operation: it puts sel, parsed from spec, in place in its turn
// (runExt).
type setAlgo struct {
	spec string
	sel  *selector
}

func (s *setAlgo) String() string                { return "set algo " + s.spec }
func (s *setAlgo) failed() transport.Fingerprint { return transport.Fingerprint{} }
