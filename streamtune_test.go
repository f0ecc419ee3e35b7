package goccl

import (
	"context"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeSetter records the way a link was last set.
type fakeSetter struct {
	on   bool
	sets int
}

func (f *fakeSetter) SetStreams(on bool) { f.on, f.sets = on, f.sets+1 }
func (f *fakeSetter) Streams() bool      { return f.on }

// TestStreamTunerPicks drives the tuner with made-up times: a class's first two calls
// are not timed, the next four alternate, the links' own way first, then the faster one
// runs, and the slower one on every streamTryEvery-th call; the links are set only when the way
// changes; small collectives are left alone; and when the host changes (the preferred
// way turns slow) the choice follows within a stretch of calls.
func TestStreamTunerPicks(t *testing.T) {
	for _, def := range []bool{false, true} {
		t.Run(fmt.Sprint("def=", def), func(t *testing.T) {
			f := &fakeSetter{on: def}
			tn := streamTuner{links: []streamLink{f}, def: def, cur: def}
			const bytes = 1 << 20
			cost := map[bool]int64{def: 3000, !def: 1000} // ns per call: the other way is 3x faster
			var ways []bool
			run := func(n int) {
				for range n {
					cls, on := tn.before(bytes)
					require.Equal(t, on, f.on, "the links run the chosen way")
					ways = append(ways, on)
					if cls != nil {
						cls.record(on, bytes, cost[on])
					}
				}
			}
			run(6)
			require.Equal(t, []bool{def, def, def, !def, def, !def}, ways, "two untimed calls, then each way twice in turn")
			run(2 * streamTryEvery)
			for i, on := range ways[6:] {
				prior := uint64(i + 6) // the class's calls before this one
				require.Equal(t, prior%streamTryEvery == 0, on == def, "call %d ran streamed=%v", prior+1, on)
			}
			sets := f.sets
			tn.before(streamTuneMin - 1)
			require.Equal(t, sets, f.sets, "a collective below streamTuneMin leaves the links as they are")

			// The host changes: the other way turns 4x slower than def.
			cost = map[bool]int64{def: 1000, !def: 4000}
			ways = ways[:0]
			run(3 * streamTryEvery)
			// From the second stretch after the change on, every call but the tries runs
			// def again (the first 6 calls + 2 stretches came before the change).
			for i, on := range ways[streamTryEvery:] {
				prior := uint64(6 + 2*streamTryEvery + streamTryEvery + i)
				require.Equal(t, prior%streamTryEvery != 0, on == def, "call %d after the change ran streamed=%v", streamTryEvery+i, on)
			}

			// The way not preferred turns faster (the preferred one unchanged): the next
			// try shows it, and from there on it runs.
			cost = map[bool]int64{def: 1000, !def: 300}
			ways = ways[:0]
			run(2 * streamTryEvery)
			base := uint64(6 + 5*streamTryEvery) // the class's calls before this stretch
			tried := false
			for i, on := range ways {
				prior := base + uint64(i)
				if !tried {
					require.Equal(t, prior%streamTryEvery == 0, on != def, "call %d before the first try", prior+1)
					tried = on != def
					continue
				}
				require.Equal(t, prior%streamTryEvery != 0, on != def, "call %d after the try ran streamed=%v", prior+1, on)
			}
			require.True(t, tried)
		})
	}
}

// TestStreamClassRecord: the first sample sets the average; later ones move it half way
// down, or up by at most a quarter; a sample of the slower way replaces its average;
// empty or zero-time calls are ignored.
func TestStreamClassRecord(t *testing.T) {
	var s streamClass
	s.record(true, 0, 100)
	s.record(true, 100, 0)
	require.Zero(t, s.ns[1])
	s.record(true, 1000, 2000) // 2 ns/B
	require.InDelta(t, 2.0, s.ns[1], 1e-12)
	s.record(true, 1000, 3000) // 3: half way
	require.InDelta(t, 2.5, s.ns[1], 1e-12)
	s.record(true, 1000, 1e6) // 1000: up by a quarter only
	require.InDelta(t, 3.125, s.ns[1], 1e-12)
	s.record(true, 1000, 1) // 0.001: half way down
	require.InDelta(t, (3.125+0.001)/2, s.ns[1], 1e-12)
	require.Zero(t, s.ns[0], "the other way is untouched")
	// The way not preferred (slower on average) is replaced by a sample, not averaged.
	s.record(false, 1000, 9000)
	require.InDelta(t, 9.0, s.ns[0], 1e-12)
	s.record(false, 1000, 1000)
	require.InDelta(t, 1.0, s.ns[0], 1e-12, "a try that is faster now replaces the old average")
	s.record(false, 1000, 1500) // now preferred: up by at most a quarter
	require.InDelta(t, 1.25, s.ns[0], 1e-12)
}

// TestStreamTunerOnComm: over shm with shm.stream_stores left at auto, a communicator
// tunes its links (and runs large AllReduces correctly while it switches them); set
// explicitly, or over tcp, it does not.
func TestStreamTunerOnComm(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		tune bool
	}{
		{"shm auto", []Option{WithTransport("shm")}, true},
		{"shm true", []Option{WithTransport("shm"), WithParam("shm.stream_stores", "true")}, false},
		{"shm false", []Option{WithTransport("shm"), WithParam("shm.stream_stores", "false")}, false},
		{"tcp", []Option{WithTransport("tcp")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const w = 2
			comms, err := InitLocal(ctx, w, tc.opts...)
			require.NoError(t, err)
			defer func() {
				for _, c := range comms {
					require.NoError(t, c.Close())
				}
			}()
			for _, c := range comms {
				require.Equal(t, tc.tune, c.streamTune.links != nil, "rank %d", c.rank)
			}
			const count = 1<<16 + 3 // 256 KiB + 12 B: timed, odd, not divisible by the world
			for call := range 6 {
				errs := make(chan error, w)
				for _, c := range comms {
					go func() {
						x := make([]float32, count)
						for i := range x {
							x[i] = float32(c.rank*3 + i%101 + call)
						}
						if err := c.AllReduce(ctx, HostSlice(x), HostSlice(x), count, Float32, Sum); err != nil {
							errs <- err
							return
						}
						for i, got := range x {
							want := float64(0)
							for r := range w {
								want += float64(r*3 + i%101 + call)
							}
							if float64(got) != want {
								errs <- fmt.Errorf("rank %d call %d: element %d = %v, want %v", c.rank, call, i, got, want)
								return
							}
						}
						errs <- nil
					}()
				}
				for range w {
					require.NoError(t, <-errs)
				}
			}
			if tc.tune {
				for _, c := range comms {
					cls := &c.streamTune.class[bits.Len(4*count)]
					require.EqualValues(t, 6, cls.calls, "rank %d", c.rank) // 2 untimed, then each way twice
					require.NotZero(t, cls.ns[0], "rank %d timed through the cache", c.rank)
					require.NotZero(t, cls.ns[1], "rank %d timed streamed", c.rank)
				}
			}
		})
	}
}
