package goccl

import (
	"context"
	"fmt"
	"sort"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// Split partitions the communicator like ncclCommSplit / MPI_Comm_split: every rank
// calls it; ranks with the same color form a new communicator, ordered by key (ties by
// old rank). A negative color returns (nil, nil): the rank joins no new communicator.
// The new communicator has its own links; the parent stays usable.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	n := c.splitSeq.Add(1)
	mine := []int64{int64(color), int64(key)}
	all := make([]int64, 2*c.size)
	if err := c.AllGather(ctx, HostSlice(mine), HostSlice(all), 2, Int64); err != nil {
		return nil, fmt.Errorf("goccl: rank %d: split: %w", c.rank, err)
	}
	if color < 0 {
		return nil, nil
	}
	type member struct{ old, key int }
	var group []member
	for r := range c.size {
		if int(all[2*r]) == color {
			group = append(group, member{r, int(all[2*r+1])})
		}
	}
	sort.SliceStable(group, func(i, j int) bool {
		if group[i].key != group[j].key {
			return group[i].key < group[j].key
		}
		return group[i].old < group[j].old
	})
	newRank := -1
	for i, m := range group {
		if m.old == c.rank {
			newRank = i
		}
	}
	cfg := c.cfg.Apply(WithRank(newRank, len(group)))
	cfg.LocalRank, cfg.LocalWorldSize = -1, -1
	ictx, cancel := context.WithTimeout(ctx, cfg.InitTimeout)
	defer cancel()
	id := fmt.Sprintf("%s.split%d.color%d", c.id, n, color)
	child, err := newComm(ictx, cfg, rendezvous.WithPrefix(c.store, "split"), id)
	if err != nil {
		return nil, fmt.Errorf("goccl: rank %d: split color %d: %w", c.rank, color, err)
	}
	// Local ranks inside the child: position among group members on the same host.
	lr := 0
	for _, m := range group {
		if m.old == c.rank {
			break
		}
		if c.peers[m.old].Host == c.host {
			lr++
		}
	}
	child.localRank = lr
	return child, nil
}

var _ transport.Store = (*rendezvous.Prefix)(nil)
