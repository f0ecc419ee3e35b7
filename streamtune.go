package goccl

import "math/bits"

// Whether a shm link should copy payloads into its ring with non-temporal stores
// (shm.Options.Streams) depends on where the two ranks' cores sit, and in a VM that
// changes under the guest: on the development VM, minutes in which a 2-rank ring
// AllReduce ran 2-2.5x faster streamed alternated with minutes in which it ran
// 1.4-1.6x faster through the cache (BENCHMARKS.md, "Speed", 23). So, with
// shm.stream_stores left at auto, the communicator times its own collectives and picks
// the faster way per size class: after two calls it does not time (a size's first
// calls pay first touches, and a process's first milliseconds after a wait run slow),
// it runs each way twice in turn, keeps an average of the time per byte of each, runs
// the faster, and every streamTryEvery-th call of the class runs the other way again,
// to notice when the host changes.
//
// Every rank counts the same calls (collectives are matched), so the ranks try the
// other way on the same calls; each keeps its own averages, and the ranks may settle
// differently, which is safe: streaming is how a sender writes its ring, and the
// receiver reads the bytes alike either way.

// streamTuneMin is the smallest collective (nccl-tests' size column) that is timed:
// below it the copies stay under streamcopy's 4 KiB, or too few to tell the ways apart.
const streamTuneMin = 64 << 10

// streamTryEvery is how often a class runs the way it does not prefer: at a 2x
// difference that costs 3 % of the class's time, and a change of the host shows within
// that many calls.
const streamTryEvery = 32

// streamLink is what the shm transport's links implement: whether they stream, and the
// override the tuner sets.
type streamLink interface {
	Streams() bool
	SetStreams(on bool)
}

// streamLinks returns this rank's shm links; ok is false when one of them is not a
// streamLink.
func (c *Comm) streamLinks() (links []streamLink, ok bool) {
	for p, l := range c.links {
		if p == c.rank || c.linkNames[p] != "shm" {
			continue
		}
		s, ok := unwrapConn(l).(streamLink)
		if !ok {
			return nil, false
		}
		links = append(links, s)
	}
	return links, true
}

// linksStream reports whether this rank has shm links and every one of them streams
// its payloads (shm.Options.Streams).
func (c *Comm) linksStream() bool {
	links, ok := c.streamLinks()
	if !ok || len(links) == 0 {
		return false
	}
	for _, l := range links {
		if !l.Streams() {
			return false
		}
	}
	return true
}

// streamTuner is the communicator's; used under execMu.
type streamTuner struct {
	links []streamLink // the shm links; nil: not tuning
	def   bool         // the links' own choice (shm.Options.Streams), tried first
	cur   bool         // the way the links are set now
	class [64]streamClass
}

// streamClass is one size class's record: collectives of [2^(i-1), 2^i) bytes.
type streamClass struct {
	calls uint64
	ns    [2]float64 // moving average of ns per byte: [0] through the cache, [1] streamed; 0 = not yet
}

// way indexes streamClass.ns.
func way(on bool) int {
	if on {
		return 1
	}
	return 0
}

// initStreamTuner starts tuning when shm.stream_stores is auto (streamAuto) and this
// rank has shm links; def is what they chose themselves.
func (c *Comm) initStreamTuner() {
	if !c.streamAuto {
		return
	}
	links, ok := c.streamLinks()
	if !ok || len(links) == 0 {
		return
	}
	c.streamTune = streamTuner{links: links, def: c.linksStream()}
	c.streamTune.cur = c.streamTune.def
}

// before picks the way for a collective of bytes and sets the links to it; it returns
// the class to record the time in, nil when this call is not timed.
func (t *streamTuner) before(bytes int) (cls *streamClass, on bool) {
	if t.links == nil || bytes < streamTuneMin {
		return nil, false
	}
	cls = &t.class[bits.Len(uint(bytes))]
	on = cls.pick(t.def)
	if on != t.cur {
		for _, l := range t.links {
			l.SetStreams(on)
		}
		t.cur = on
	}
	cls.calls++
	if cls.calls <= streamUntimed {
		return nil, on
	}
	return cls, on
}

// streamUntimed calls of a class run the links' own way untimed; the next streamFirst
// alternate between the two ways, the links' own first.
const (
	streamUntimed = 2
	streamFirst   = 4
)

// pick is the way for the class's next call: the links' own choice, then each way in
// turn, then the faster, and the slower every streamTryEvery-th call. A way that has no
// time yet (runCollective records only the calls that ran auto's online choice of
// algorithm, algotune.go) runs until it has one.
func (s *streamClass) pick(def bool) bool {
	switch n := s.calls; {
	case n < streamUntimed:
		return def
	case n < streamUntimed+streamFirst:
		return (n-streamUntimed)%2 == 0 == def
	}
	switch { // a way with no time yet
	case s.ns[0] == 0 && s.ns[1] == 0:
		return def
	case s.ns[0] == 0:
		return false
	case s.ns[1] == 0:
		return true
	}
	fast := s.ns[1] < s.ns[0]
	if s.calls%streamTryEvery == 0 {
		return !fast
	}
	return fast
}

// record adds a call of bytes that took ns the way on. For the way the class prefers,
// which runs call after call, a faster sample moves the average half way and a slower
// one by at most a quarter: the host's hiccups only ever slow a call down, so one of
// them does not flip the choice, while a real slow-down does within a few calls. The
// other way runs only on tries, so its average is old by then, and a try replaces it:
// a change of the host shows at the first try after it (and a try that was fast by
// chance is undone by the calls that then run that way).
func (s *streamClass) record(on bool, bytes int, ns int64) {
	if bytes <= 0 || ns <= 0 {
		return
	}
	x := float64(ns) / float64(bytes)
	p, other := &s.ns[way(on)], s.ns[way(!on)]
	switch {
	case *p == 0 || other != 0 && *p > other:
		*p = x
	case x < *p:
		*p = (*p + x) / 2
	default:
		*p = min((*p+x)/2, *p*1.25)
	}
}
