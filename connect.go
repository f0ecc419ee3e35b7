package goccl

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/goccl/goccl/internal/tune"
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
	}
	c.sel.Load().setModel(c.linkNames, hosts, c.rank, c.cfg.ChunkBytes, tuned)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
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
			mu.Lock()
			c.links[peer] = c.observe(peer, conn)
			c.closers = append(c.closers, conn)
			mu.Unlock()
			if d, ok := conn.(transport.Describer); ok {
				c.log.Debug("link up", "subsys", "INIT", "peer", peer, "link", d.Describe())
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	c.offload = c.findOffloader()
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
