package goccl

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/internal/tune"
	"github.com/goccl/goccl/shm"
	"github.com/goccl/goccl/transport"
)

// choose walks the transport list for one peer and returns the first transport both
// ranks opened whose endpoint says it can connect (NCCL's canConnect rule), with the
// reasons the earlier ones were skipped.
func (c *Comm) choose(names []string, peer int) (string, []string) {
	p := c.peers[peer]
	var skipped []string
	for _, name := range names {
		ep, ok := c.eps[name]
		if !ok {
			skipped = append(skipped, name+": not available on rank "+fmt.Sprint(c.rank))
			continue
		}
		h, ok := p.Handles[name]
		if !ok {
			skipped = append(skipped, fmt.Sprintf("%s: not available on rank %d", name, peer))
			continue
		}
		if err := ep.CanConnect(transport.PeerInfo{Rank: peer, Host: p.Host, Pid: p.Pid, Handle: h}); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		return name, skipped
	}
	return "", skipped
}

// connectAll links this rank to every peer, all pairs at once.
func (c *Comm) connectAll(ctx context.Context, names []string) error {
	c.links = make([]transport.Conn, c.size)
	c.localEager, c.eager = math.MaxInt, algos.EagerBytes
	c.linkStates = make([]linkState, c.size)
	c.linkNames = make([]string, c.size)
	c.linkNames[c.rank] = "self"
	for peer := range c.size {
		if peer == c.rank {
			continue
		}
		name, skipped := c.choose(names, peer)
		if name == "" {
			return fmt.Errorf("goccl: rank %d: %w: no transport reaches rank %d on host %q (tried %s)",
				c.rank, transport.ErrNotSupported, peer, c.peers[peer].Host, strings.Join(skipped, "; "))
		}
		c.linkNames[peer] = name
		c.log.Info("channel", "subsys", "INIT", "peer", peer, "peer_host", c.peers[peer].Host,
			"transport", name, "skipped", strings.Join(skipped, "; "))
	}
	hosts := make([]string, c.size)
	for r := range hosts {
		hosts[r] = c.PeerHost(r)
	}
	var tuned tune.Models
	if c.cfg.TuneFile != "" {
		f, err := tune.Load(c.cfg.TuneFile)
		if err != nil {
			return fmt.Errorf("goccl: rank %d: tune_file: %w", c.rank, err)
		}
		tuned = f.CostModels()
		if r, ok := f.StagedFor(c.size); ok && !c.stagedSet && c.stagedMin >= 0 {
			c.stagedMin, c.stagedMax = stagedRange(r)
			c.log.Info("staged range from tune_file", "subsys", "INIT", "file", c.cfg.TuneFile, "range", r.String())
		}
	}
	c.sel.Load().setModel(c.linkNames, hosts, c.rank, c.cfg.ChunkBytes, c.stagingBytes, tuned)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var invalid error // a link below the eager floor: the user's settings, reported even when a peer aborted first
	for peer := range c.size {
		if peer == c.rank {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := c.peers[peer]
			name := c.linkNames[peer]
			conn, err := c.eps[name].Connect(ctx, transport.PeerInfo{Rank: peer, Host: p.Host, Pid: p.Pid, Handle: p.Handles[name]})
			if err != nil {
				cancel(fmt.Errorf("goccl: rank %d: connect to rank %d on %s over %s: %w", c.rank, peer, p.Host, name, err))
				return
			}
			eager := algos.EagerBytes
			if e, ok := conn.(transport.Eager); ok {
				eager = e.EagerBytes()
			}
			if eager < algos.EagerBytes {
				conn.Close()
				err := fmt.Errorf("goccl: rank %d: %w: the %s link to rank %d takes %d bytes without a running receive; "+
					"the algorithms send up to %d on both ranks before they receive: enlarge the link's buffers "+
					"(for rdma, rdma.chunk_bytes x rdma.credits of at least two such messages and their headers)",
					c.rank, transport.ErrInvalid, name, peer, eager, algos.EagerBytes)
				mu.Lock()
				if invalid == nil {
					invalid = err
				}
				mu.Unlock()
				cancel(err)
				return
			}
			mu.Lock()
			c.localEager = min(c.localEager, eager)
			c.links[peer] = c.observe(peer, conn)
			c.closers = append(c.closers, conn)
			mu.Unlock()
			if d, ok := conn.(transport.Describer); ok {
				c.log.Debug("link up", "subsys", "INIT", "peer", peer, "link", d.Describe())
			}
		}()
	}
	wg.Wait()
	if invalid != nil {
		return invalid
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	c.offload = c.findOffloader()
	c.initFastPath()
	return nil
}

// findOffloader returns the endpoint that can run whole collectives, when every link
// goes through it (a single-rank communicator counts if one was opened).
func (c *Comm) findOffloader() transport.Offloader {
	var name string
	for peer, n := range c.linkNames {
		if peer == c.rank {
			continue
		}
		if name != "" && n != name {
			return nil
		}
		name = n
	}
	if name == "" {
		for n, ep := range c.eps {
			if _, ok := ep.(transport.Offloader); ok {
				name = n
				break
			}
		}
	}
	if o, ok := c.eps[name].(transport.Offloader); ok {
		return o
	}
	return nil
}

// tcpChunkBytes is the pipelining unit when every link of every rank is tcp: a larger
// chunk than the algorithms' default (512 KiB) saves a sixth to a fifth of the CPU of a
// large AllReduce over loopback, where each message costs system calls on both sides
// (BENCHMARKS.md, "tcp").
const tcpChunkBytes = 2 << 20

// agreeEager makes every rank assume the same eager size (transport.Eager), the smallest
// that any link of any rank promises, and the same pipelining unit. Algorithms choose
// which messages to send by both, so ranks must not differ. The same call settles
// whether every rank can have a staging area (algos/staged), which auto's choice of
// that algorithm depends on, and whether every rank's shm links stream, which the
// staged ranges depend on (shm.StagedMinFor). It is one AllReduce(min)
// with sequence number 0, which no user operation has, run before Init returns.
func (c *Comm) agreeEager(ctx context.Context) error {
	c.chunk = c.cfg.ChunkBytes
	if c.localEager == math.MaxInt { // no links: a single rank
		return nil
	}
	chunk := int64(0) // the algorithms' default, unless every link is tcp
	if c.cfg.ChunkBytes == 0 {
		chunk = tcpChunkBytes
		for p, n := range c.linkNames {
			if p != c.rank && n != "tcp" {
				chunk = 0
			}
		}
	}
	stage := int64(0) // whether this rank can have a staging area (algos/staged)
	if c.canStage() {
		stage = 1
	}
	streams := int64(0) // whether this rank's shm links, if any, all stream their payloads
	if c.linksStream() {
		streams = 1
	}
	tuneOnline := int64(0) // whether this rank's config asks for auto's online choice
	if c.cfg.AlgoTune == AlgoTuneOnline {
		tuneOnline = 1
	}
	v := []int64{int64(c.localEager), chunk, stage, streams, tuneOnline}
	b := HostSlice(v)
	k := call{kind: KindAllReduce, send: b, recv: b, count: len(v), dt: Int64, op: Min, root: -1}
	c.execMu.Lock()
	err := c.doCollective(ctx, &Work{}, &k, transport.Header{Seq: 0, Fp: k.fingerprint()}, nil)
	c.execMu.Unlock()
	if err != nil {
		return fmt.Errorf("goccl: rank %d: agreeing on the eager message size at init: %w", c.rank, err)
	}
	c.eager = max(int(v[0]), algos.EagerBytes)
	c.stageable, c.streams = v[2] == 1, v[3] == 1
	if v[4] == 1 && c.size > 1 {
		c.algoTune.setSchedule(algoTuneMin, algoUntimed, algoTrials, algoTryEvery, algoBand)
	}
	if tuneOnline == 1 && !c.algoTune.on && c.size > 1 {
		c.log.Warn("algo_tune online is off: not every rank's config asks for it", "subsys", "INIT")
	}
	c.initStreamTuner()
	if c.stagedMin == 0 { // unset, and no tune file's range either
		c.stagedMin = shm.StagedMinFor(c.size, c.streams)
	}
	if c.cfg.ChunkBytes == 0 {
		c.chunk = int(v[1])
	}
	// The cost model prices steps up to the eager size as serial; every rank has the
	// same value now, so every rank's auto still picks alike.
	sel := c.sel.Load()
	sel.model.EagerBytes = c.eager
	if c.chunk > 0 {
		sel.model.ChunkBytes = c.chunk
	}
	sel.mu.Lock()
	sel.picks = nil
	sel.mu.Unlock()
	sel.last.Store(nil)
	c.log.Debug("eager size", "subsys", "INIT", "bytes", c.eager, "local", c.localEager)
	return nil
}
