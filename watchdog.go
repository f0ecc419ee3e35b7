package goccl

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// watchPeriod is how often a rank publishes how far it got. It costs one store write
// per period, and only when the rank made progress.
const watchPeriod = 500 * time.Millisecond

// watchdog publishes this rank's progress (collectives started) to the store, so that
// when an operation hangs every rank can tell which peer never reached it.
func (c *Comm) watchdog() {
	defer close(c.watchDone)
	t := time.NewTicker(watchPeriod)
	defer t.Stop()
	var last uint64
	publish := func() {
		n := c.progress.Load()
		if n == last {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), watchPeriod)
		if c.store.Set(ctx, "progress/"+strconv.Itoa(c.rank), []byte(strconv.FormatUint(n, 10))) == nil {
			last = n
		}
		cancel()
	}
	c.store.Set(context.Background(), "progress/"+strconv.Itoa(c.rank), []byte("0"))
	for {
		select {
		case <-t.C:
			publish()
		case <-c.quit:
			return
		case <-c.loopDone:
			return
		}
	}
}

// behind returns the peers whose last published progress is before op seq: the ranks
// that have not called it (or died before it).
func (c *Comm) behind(seq uint64) []string {
	if c.size == 1 || seq == 0 {
		return nil
	}
	out := make([]string, c.size)
	var wg sync.WaitGroup
	for p := range c.size {
		if p == c.rank {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			b, err := c.store.Get(ctx, "progress/"+strconv.Itoa(p))
			if err != nil {
				return
			}
			n, err := strconv.ParseUint(string(b), 10, 64)
			if err == nil && n < seq {
				out[p] = fmt.Sprintf("rank %d (host %s) has only started %d collectives; it never called #%d", p, c.PeerHost(p), n, seq)
			}
		}()
	}
	wg.Wait()
	var res []string
	for _, s := range out {
		if s != "" {
			res = append(res, s)
		}
	}
	return res
}
