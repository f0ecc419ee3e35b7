package goccl

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"

	_ "github.com/goccl/goccl/transport/inmem" // goroutine ranks link in memory
)

// InitLocal creates world communicators in this process, one per goroutine rank,
// linked by the in-process transport over a shared MemStore (tests, examples, and
// programs that want several ranks in one process). opts apply to every rank; pass
// WithTransport to link the goroutines over real sockets or shared memory instead.
func InitLocal(ctx context.Context, world int, opts ...Option) ([]*Comm, error) {
	if world < 1 {
		return nil, fmt.Errorf("goccl: %w: world size %d (must be at least 1)", transport.ErrInvalid, world)
	}
	store := rendezvous.NewMemStore()
	comms := make([]*Comm, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := DefaultConfig().Apply(WithTransport("inmem"), WithStore(store))
			cfg = cfg.Apply(opts...).Apply(WithRank(r, world), WithLocalRank(r, world))
			comms[r], errs[r] = Init(ctx, cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
		return nil, err
	}
	return comms, nil
}
