package dp

import (
	"sort"
	"time"
)

// StepStats describes the communication of one optimizer step (everything issued
// from the end of the previous Step to the end of this one).
type StepStats struct {
	// Collectives issued and the bytes they covered (per rank, before the algorithm's
	// own traffic: 2(W-1)/W of that for a ring all-reduce).
	Collectives int
	Bytes       int64
	// Comm is the time the communicator was busy with them: the union of the
	// intervals from issue to completion.
	Comm time.Duration
	// Exposed is the time the training loop was blocked waiting for them (in Wait,
	// ZeRO-3's gathers, and Step's parameter all-gather); Comm - Exposed was hidden
	// behind computation.
	Exposed time.Duration
	// Skipped is set when fp16 loss scaling found an overflow and skipped the update.
	Skipped bool
}

// Hidden is the share of communication time that overlapped computation (0..1).
func (s StepStats) Hidden() float64 {
	if s.Comm <= 0 {
		return 0
	}
	h := 1 - float64(s.Exposed)/float64(s.Comm)
	return min(1, max(0, h))
}

// LastStep returns the statistics of the most recent Step.
func (e *Engine) LastStep() StepStats { return e.last }

type interval struct{ a, b time.Time }

// stepClock accumulates one step's statistics.
type stepClock struct {
	n       int
	bytes   int64
	exposed time.Duration
	spans   []interval
}

func (c *stepClock) issued(bytes int)        { c.n++; c.bytes += int64(bytes) }
func (c *stepClock) blocked(d time.Duration) { c.exposed += d }
func (c *stepClock) busy(a, b time.Time)     { c.spans = append(c.spans, interval{a, b}) }

// take returns the step's statistics and starts the next step's.
func (c *stepClock) take() StepStats {
	s := StepStats{Collectives: c.n, Bytes: c.bytes, Exposed: c.exposed}
	sort.Slice(c.spans, func(i, j int) bool { return c.spans[i].a.Before(c.spans[j].a) })
	var end time.Time
	for _, iv := range c.spans {
		if iv.a.After(end) {
			s.Comm += iv.b.Sub(iv.a)
			end = iv.b
		} else if iv.b.After(end) {
			s.Comm += iv.b.Sub(end)
			end = iv.b
		}
	}
	*c = stepClock{spans: c.spans[:0]}
	return s
}
