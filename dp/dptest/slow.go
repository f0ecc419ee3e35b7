package dptest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/transport"
)

// Log is a goroutine-safe, ordered record of named events.
type Log struct {
	mu     sync.Mutex
	events []Event
}

// Event is one entry: what happened, on which rank, and when.
type Event struct {
	Seq  int
	Rank int
	What string
	Time time.Time
}

// Add appends an event.
func (l *Log) Add(rank int, what string) {
	l.mu.Lock()
	l.events = append(l.events, Event{Seq: len(l.events), Rank: rank, What: what, Time: time.Now()})
	l.mu.Unlock()
}

// Events returns a copy of the record.
func (l *Log) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// Index is the position of the first event of rank named what, or -1.
func (l *Log) Index(rank int, what string) int {
	for _, e := range l.Events() {
		if e.Rank == rank && e.What == what {
			return e.Seq
		}
	}
	return -1
}

// Slow wraps a communicator so that every collective takes at least delay longer, the
// way a slow network would: collectives still run one at a time in issue order, and
// each is logged as "<kind> start" when it begins to run (not when it is issued) and
// "<kind> end" when it has finished, numbered per kind ("allreduce#0 start").
func Slow(inner dp.Collectives, delay time.Duration, log *Log) dp.Collectives {
	s := &slow{inner: inner, delay: delay, log: log, queue: make(chan *pending, 64), count: map[string]int{}}
	go s.loop()
	return s
}

type slow struct {
	inner dp.Collectives
	delay time.Duration
	log   *Log
	queue chan *pending
	mu    sync.Mutex
	count map[string]int
}

type pending struct {
	ctx  context.Context
	name string
	run  func() dp.Pending
	done chan struct{}
	err  error
}

func (p *pending) Done() <-chan struct{} { return p.done }

func (p *pending) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slow) loop() {
	for p := range s.queue {
		if s.log != nil {
			s.log.Add(s.inner.Rank(), p.name+" start")
		}
		select {
		case <-time.After(s.delay):
			p.err = p.run().Wait(p.ctx)
		case <-p.ctx.Done():
			p.err = p.ctx.Err()
		}
		if s.log != nil {
			s.log.Add(s.inner.Rank(), p.name+" end")
		}
		close(p.done)
	}
}

func (s *slow) submit(ctx context.Context, kind string, run func() dp.Pending) dp.Pending {
	s.mu.Lock()
	name := fmt.Sprintf("%s#%d", kind, s.count[kind])
	s.count[kind]++
	s.mu.Unlock()
	p := &pending{ctx: ctx, name: name, run: run, done: make(chan struct{})}
	s.queue <- p
	return p
}

func (s *slow) Rank() int { return s.inner.Rank() }
func (s *slow) Size() int { return s.inner.Size() }

func (s *slow) AllReduce(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) dp.Pending {
	return s.submit(ctx, "allreduce", func() dp.Pending { return s.inner.AllReduce(ctx, send, recv, count, dt, op) })
}

func (s *slow) ReduceScatter(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, op transport.Op) dp.Pending {
	return s.submit(ctx, "reducescatter", func() dp.Pending { return s.inner.ReduceScatter(ctx, send, recv, count, dt, op) })
}

func (s *slow) AllGather(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType) dp.Pending {
	return s.submit(ctx, "allgather", func() dp.Pending { return s.inner.AllGather(ctx, send, recv, count, dt) })
}

func (s *slow) Broadcast(ctx context.Context, send, recv transport.Buffer, count int, dt transport.DType, root int) dp.Pending {
	return s.submit(ctx, "broadcast", func() dp.Pending { return s.inner.Broadcast(ctx, send, recv, count, dt, root) })
}
