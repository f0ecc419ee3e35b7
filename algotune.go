package goccl

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/staged"
)

// Auto's online choice of the AllReduce algorithm (Config.AlgoTune "online").
//
// The cost model ranks the algorithms from a few numbers per transport, and on the
// development VMs the order of the fastest two at the mid and large sizes has changed
// from host to host and from hour to hour (BENCHMARKS.md, "Speed", 38c and 45c: staged
// or the ring at 3 ranks from 1 to 8 MiB, staged or naive at 4 ranks at 128 KiB). Online,
// the communicator times its own AllReduces and runs the fastest of a few candidates per
// size class, as the stream tuner (streamtune.go) chooses how the shm links copy.
//
// Unlike the stream tuner's, this choice changes which messages a call sends, so every
// rank must make it alike. Every rank counts the same calls of a class (collectives are
// matched), so the schedule below runs the same candidate on every rank; the choice
// changes only where the ranks agree: each sends the others its recent time per byte of
// every candidate, every rank takes the slowest rank's figure for each (a collective
// lasts as long as its slowest rank) and the least of those, which is the same on every
// rank.
//
// The schedule of a class: its first algoUntimed calls run the model's pick untimed
// (a size's first calls pay first touches). The next algoTrials rounds run every
// candidate in turn, and the ranks agree after the last. From then on the choice runs,
// and every algoTryEvery-th call runs the next of the others instead, after which the
// ranks agree again: a change of the host shows within that many calls, and the tries
// cost a few per cent of the class's time at most.

const (
	// algoTuneMin is the smallest AllReduce (nccl-tests' size column) that is tuned:
	// below it the model's choice and the fast paths serve, and one agreement would
	// cost as much as several calls. It must stay above algos.SmallExchangeMax: a call
	// that size may run as the communicator's own exchange on one rank and through the
	// general path on another (the messages are alike), and only the general path
	// counts calls for the tuner.
	algoTuneMin = 64 << 10
	algoUntimed = 2
	algoTrials  = 2
	// algoTryEvery is how often the choice gives way to one of the others.
	algoTryEvery = 64
	// algoKeep: the choice stays unless another candidate's time is under this share
	// of its own, so that two algorithms within the noise do not take turns.
	algoKeep = 0.95
	// algoSamples recent times per candidate, whose least stands for it: the host's
	// hiccups only ever slow a call down, and one of them does not move it, while a
	// lasting slow-down shows within that many calls.
	algoSamples = 3
	// algoBand: an algorithm the cost model prices at more than this times its fastest
	// is not a candidate.
	algoBand = 1.3
)

// Values of Config.AlgoTune.
const (
	AlgoTuneModel  = "model"  // auto runs the cost model's choice
	AlgoTuneOnline = "online" // auto times its candidates per AllReduce size class and runs the fastest
)

// algoTuner is the communicator's; used under execMu.
type algoTuner struct {
	on bool // every rank tunes (agreed at Init)
	// The schedule: algoTuneMin, algoUntimed, algoTrials, algoTryEvery and algoBand,
	// which tests shorten and widen (setSchedule) so that agreements meet every kind of
	// call.
	min                    int
	untimed, trials, every uint64
	band                   float64
	class                  [64]algoClass
	// agreed is each class's choice once the ranks have agreed on one, with the
	// figures it was made on, for Comm.Algo, which may run beside an operation.
	agreed [64]atomic.Pointer[agreedChoice]
}

type agreedChoice struct {
	a   algos.Algorithm
	why string
}

// algoClass is one size class's record: AllReduces of [2^(i-1), 2^i) bytes.
type algoClass struct {
	calls  uint64
	cands  []algos.Algorithm // [0] is the model's choice; stagedAlgo stands for staged
	ns     [][algoSamples]float64
	n      []int // samples taken per candidate
	choice int   // the index every rank runs, agreed
	index  int   // the class's index in algoTuner.class
	next   int   // the candidate the next try runs
	off    bool  // the class has fewer than two candidates
}

// algoTry is what the tuner decided for one call.
type algoTry struct {
	cls   *algoClass // nil: not tuned
	i     int        // the candidate it runs
	timed bool
	agree bool // the ranks agree after the call
}

// before picks the algorithm for an AllReduce of bytes; pick is the model's choice for
// it, first staged where the communicator would stage it.
func (c *Comm) algoBefore(bytes int, pick algos.Algorithm) algoTry {
	t := &c.algoTune
	if !t.on || bytes < t.min {
		return algoTry{}
	}
	cls := &t.class[bits.Len(uint(bytes))]
	if cls.off {
		return algoTry{}
	}
	if cls.cands == nil {
		cls.cands = c.algoCands(pick, bytes)
		if len(cls.cands) < 2 {
			cls.off = true
			return algoTry{}
		}
		cls.index = bits.Len(uint(bytes))
		cls.ns = make([][algoSamples]float64, len(cls.cands))
		cls.n = make([]int, len(cls.cands))
		cls.next = 1
	}
	n := cls.calls
	cls.calls++
	k := uint64(len(cls.cands))
	switch {
	case n < t.untimed:
		return algoTry{cls: cls, i: 0}
	case n < t.untimed+t.trials*k:
		j := n - t.untimed
		return algoTry{cls: cls, i: int(j % k), timed: true, agree: j == t.trials*k-1}
	case (n-t.untimed-t.trials*k+1)%t.every == 0:
		i := cls.advance()
		if i == cls.choice {
			i = cls.advance()
		}
		return algoTry{cls: cls, i: i, timed: true, agree: true}
	}
	return algoTry{cls: cls, i: cls.choice, timed: true}
}

// advance returns the candidate the next try runs and moves on to the one after.
func (cls *algoClass) advance() int {
	i := cls.next
	cls.next = (i + 1) % len(cls.cands)
	return i
}

// algoCands lists the candidates for a class whose first call, of bytes, the
// communicator gave pick: pick, the cost model's fastest, and every other of the ring,
// naive, rd and staged that the model puts within algoBand of its fastest. Staged is
// one where the group has a staging area, unless shm.staged_min is off or the config
// sets a staged range that bytes is outside (the built-in range, and a tune file's,
// are the model's kind of guess, which the tuner is there to check). So the tuner
// spends calls only where the model is unsure: pick is the model's unless the staged
// range overrode it (shm.StagedMinFor), and the model has ranked the two closest
// algorithms wrongly on some hosts. Where staged is a candidate, so is the fastest of
// the others, however the model prices it: staged's order against the ring or naive
// has turned from host to host by more than the band (shm.StagedMinFor). Only a choice
// among the single-host algorithms is tuned; the hierarchical one (ranks on several
// hosts) and the offload keep the model's choice. There are at most five candidates (a
// tree pick and the four).
func (c *Comm) algoCands(pick algos.Algorithm, bytes int) []algos.Algorithm {
	switch pick.Name() {
	case "ring", "naive", "rd", "tree", staged.Name:
	default:
		return nil
	}
	model := c.sel.Load().model
	type cand struct {
		a algos.Algorithm
		t time.Duration
	}
	var all []cand
	for _, name := range []string{"ring", "naive", "rd", staged.Name} {
		a, err := algos.Lookup(name)
		if name == staged.Name {
			if !c.stageable || c.staging.state.Load() == stagingOff || c.stagedMin < 0 ||
				c.stagedSet && (bytes < c.stagedMin || bytes > c.stagedMax) { // the config's range binds; a default or a tune file's does not
				continue
			}
			a, err = stagedAlgo, nil
		}
		if err != nil || !a.Supports(KindAllReduce) {
			continue
		}
		t, err := model.Predict(name, KindAllReduce, bytes, c.size)
		if err != nil || t <= 0 {
			continue
		}
		all = append(all, cand{a, t})
	}
	if len(all) == 0 {
		return nil
	}
	byTime := func(x, y cand) int { return cmp.Compare(x.t, y.t) }
	fastest := slices.MinFunc(all, byTime)
	cands := []algos.Algorithm{pick}
	for _, x := range all {
		if x.a.Name() != pick.Name() && (x.a == fastest.a || float64(x.t) <= c.algoTune.band*float64(fastest.t)) {
			cands = append(cands, x.a)
		}
	}
	if slices.Contains(cands, stagedAlgo) {
		// The model's order of staged and the others has been wrong both ways
		// (shm.StagedMinFor), so the fastest of the others is always tried beside it.
		others := slices.DeleteFunc(slices.Clone(all), func(x cand) bool { return x.a == stagedAlgo })
		if len(others) > 0 {
			if o := slices.MinFunc(others, byTime).a; !slices.Contains(cands, o) {
				cands = append(cands, o)
			}
		}
	}
	return cands
}

// record adds a call that ran candidate i over bytes in ns.
func (cls *algoClass) record(i, bytes int, ns int64) {
	if bytes <= 0 || ns <= 0 {
		return
	}
	cls.ns[i][cls.n[i]%algoSamples] = float64(ns) / float64(bytes)
	cls.n[i]++
}

// estimate is the least of candidate i's recent times per byte; 0 when it has none.
func (cls *algoClass) estimate(i int) float64 {
	n := min(cls.n[i], algoSamples)
	if n == 0 {
		return 0
	}
	return slices.Min(cls.ns[i][:n])
}

// algoAgree runs after a call the schedule marks: every rank sends its estimates to
// every other under the call's header, takes the largest figure per candidate, and
// moves the class's choice to the least of them when that is under algoKeep of the
// current choice's.
func (c *Comm) algoAgree(ctx context.Context, p algos.Peers, cls *algoClass) error {
	k := len(cls.cands)
	var buf [8 * 8]byte // at most 8 candidates
	mine := buf[:8*k]
	t := make([]float64, k)
	for i := range k {
		t[i] = cls.estimate(i)
		binary.LittleEndian.PutUint64(mine[8*i:], math.Float64bits(t[i]))
	}
	tag := algos.Tag(algos.TagTune, 0, 0)
	for d := 1; d < c.size; d++ {
		if err := algos.Send(ctx, p, (c.rank+d)%c.size, tag, mine); err != nil {
			return fmt.Errorf("auto's online choice: %w", err)
		}
	}
	var in [8 * 8]byte
	for d := 1; d < c.size; d++ {
		if err := algos.Recv(ctx, p, (c.rank-d+c.size)%c.size, tag, in[:8*k]); err != nil {
			return fmt.Errorf("auto's online choice: %w", err)
		}
		for i := range k {
			t[i] = max(t[i], math.Float64frombits(binary.LittleEndian.Uint64(in[8*i:])))
		}
	}
	if from := cls.choice; cls.settle(t) && c.log.Enabled(ctx, slog.LevelDebug) {
		c.log.Debug("auto's online choice", "subsys", "COLL", "from", cls.cands[from].Name(),
			"to", cls.cands[cls.choice].Name(), "ns_per_KiB", cls.describe(t))
	}
	c.algoTune.agreed[cls.index].Store(&agreedChoice{cls.cands[cls.choice],
		fmt.Sprintf("%s (auto, algo_tune online: the ranks' slowest ns per KiB %s)", cls.cands[cls.choice].Name(), cls.describe(t))})
	return nil
}

// setSchedule sets the tuner's schedule (algoTuner's fields) and turns it on; every
// rank must set the same one before its first collective. min is raised above
// algos.SmallExchangeMax (see algoTuneMin), trials to 1, every to 2 and band to 1 at
// least.
func (t *algoTuner) setSchedule(min int, untimed, trials, every uint64, band float64) {
	t.on = true
	t.min, t.untimed, t.trials, t.every = max(min, algos.SmallExchangeMax+1), untimed, max(trials, 1), max(every, 2)
	t.band = max(band, 1)
}

// algoAgreed reports the algorithm the ranks agreed on for an AllReduce of bytes and
// why; nil when the class is not tuned or not yet agreed.
func (c *Comm) algoAgreed(bytes int) (algos.Algorithm, string) {
	if !c.algoTune.on || bytes < c.algoTune.min {
		return nil, ""
	}
	if a := c.algoTune.agreed[bits.Len(uint(bytes))].Load(); a != nil {
		return a.a, a.why
	}
	return nil, ""
}

// settle moves the class's choice to the candidate with the least time per byte in t
// (0: none measured) when that is under algoKeep of the current choice's, or the choice
// has none; it reports whether the choice changed.
func (cls *algoClass) settle(t []float64) bool {
	best := cls.choice
	for i, x := range t {
		if x > 0 && (t[best] == 0 || x < t[best]) {
			best = i
		}
	}
	if best == cls.choice || t[cls.choice] != 0 && t[best] >= algoKeep*t[cls.choice] {
		return false
	}
	cls.choice = best
	return true
}

// describe lists each candidate's figure, for the log.
func (cls *algoClass) describe(t []float64) string {
	var b strings.Builder
	for i, a := range cls.cands {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%.0f", a.Name(), t[i]*1024)
	}
	return b.String()
}
