package goccl_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/internal/tune"
	"github.com/goccl/goccl/shm"
)

func stagedCalls(c *goccl.Comm) uint64 { return c.Stats().ByAlgo["staged"].Calls }

// stagedAllReduce runs AllReduce on ordinary buffers of count float32 elements on every
// rank, out of place and in place, for sum, avg and max, and checks every element
// against a serial float64 reference (checkedAllReduce).
func stagedAllReduce(t *testing.T, comms []*goccl.Comm, count int) {
	t.Helper()
	checkedAllReduce(t, comms, count, func(*goccl.Comm) ([]float32, []float32, func(), error) {
		return make([]float32, count), make([]float32, count), nil, nil
	})
}

// TestStagedAllReduce: goroutine ranks over real shm windows; ordinary buffers of 1 to
// 256K+3 elements (odd, not divisible by the world) go through the staging area from
// shm.staged_min, with a 4 KiB part (windows of 2 KiB: many per call, the last one short)
// and with the default part; below shm.staged_min, and with it off, they do not. The
// default shm.staged_min depends on whether the links stream (shm.StagedMinFor: never
// at 2 ranks when they do), so the default runs with shm.stream_stores both ways.
func TestStagedAllReduce(t *testing.T) {
	for _, w := range []int{2, 3, 4} {
		for _, tc := range []struct {
			min, part string
			stream    bool
		}{{"0", "4K", false}, {"0", "", false}, {"", "", false}, {"", "", true}, {"off", "", false}} {
			t.Run(fmt.Sprintf("w%d/min=%q/part=%q/stream=%v", w, tc.min, tc.part, tc.stream), func(t *testing.T) {
				opts := []goccl.Option{goccl.WithTransport("shm"), goccl.WithParam("shm.stream_stores", fmt.Sprint(tc.stream))}
				if tc.min != "" {
					opts = append(opts, goccl.WithParam("shm.staged_min", tc.min))
				}
				if tc.part != "" {
					opts = append(opts, goccl.WithParam("shm.staging_bytes", tc.part))
				}
				comms := local(t, w, opts...)
				part := shm.StagingBytesFor(w)
				if tc.part != "" {
					part = 4 << 10
				}
				require.Equal(t, part, comms[0].CostModel().StagingBytes, "the model prices staged's windows by the part")
				want := uint64(0)
				for _, count := range []int{1, 7, 13, 1000, 1<<18 + 3} {
					stagedAllReduce(t, comms, count)
					staged := tc.min == "0" && 4*count > 1<<10 || tc.min == "" && 4*count >= shm.StagedMinFor(w, tc.stream)
					if staged {
						want += 6 // three ops, in and out of place
					}
					for r, c := range comms {
						require.Equal(t, want, stagedCalls(c), "rank %d after count %d", r, count)
					}
				}
			})
		}
	}
}

// TestStagedNamedInConfig: "staged" named in the config runs every AllReduce through the
// area (even the small ones), and the other collectives on the ring's fallback chain.
func TestStagedNamedInConfig(t *testing.T) {
	comms := local(t, 3, goccl.WithTransport("shm"), goccl.WithAlgo("staged"))
	stagedAllReduce(t, comms, 13)
	stagedAllReduce(t, comms, 70001)
	for r, c := range comms {
		require.Equal(t, uint64(12), stagedCalls(c), "rank %d", r)
	}
	errs := runRanks(comms, func(c *goccl.Comm) error {
		xs := []float32{float32(c.Rank()), 1}
		if err := goccl.BroadcastSlice(context.Background(), c, xs, 2); err != nil {
			return err
		}
		if xs[0] != 2 || xs[1] != 1 {
			return fmt.Errorf("rank %d: broadcast gave %v, want [2 1]", c.Rank(), xs)
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// TestStagedOverTCP: a group whose links are not shm has no staging area; auto never
// stages, and a configured "staged" runs the ring, with correct results either way.
func TestStagedOverTCP(t *testing.T) {
	for _, algo := range []string{"", "staged"} {
		t.Run("algo="+algo, func(t *testing.T) {
			opts := []goccl.Option{goccl.WithTransport("tcp"), goccl.WithParam("shm.staged_min", "0")}
			if algo != "" {
				opts = append(opts, goccl.WithAlgo(algo))
			}
			comms := local(t, 3, opts...)
			stagedAllReduce(t, comms, 70001)
			for r, c := range comms {
				require.Zero(t, stagedCalls(c), "rank %d", r)
			}
			if algo == "staged" {
				require.Equal(t, uint64(6), comms[0].Stats().ByAlgo["ring"].Calls)
			}
		})
	}
}

// TestStagedDirFull: when some rank cannot create its part (shm.dir is a 2 MiB tmpfs,
// too small for three 1 MiB parts beside the links' rings), every rank gives the area up
// alike and runs the call with auto's algorithm; nothing is left in the directory.
func TestStagedDirFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	// After the communicators close (local's cleanup runs first), before TempDir's.
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	comms := local(t, 3, goccl.WithTransport("shm"), goccl.WithParam("shm.dir", dir), goccl.WithParam("shm.ring_bytes", "64K"),
		goccl.WithParam("shm.chunk_bytes", "16K"), goccl.WithParam("shm.staging_bytes", "1M"), goccl.WithParam("shm.staged_min", "0"))
	stagedAllReduce(t, comms, 70001)
	stagedAllReduce(t, comms, 70001) // the area stays off: no set-up again, no mismatch
	for r, c := range comms {
		require.Zero(t, stagedCalls(c), "rank %d", r)
	}
	left, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	require.Empty(t, left, "names left in the directory")
}

// TestStagedLeavesNothing: the staging area's names live only while the ranks map them;
// a live area and one that Close releases leave nothing in /dev/shm.
func TestStagedLeavesNothing(t *testing.T) {
	comms, err := goccl.InitLocal(context.Background(), 3, goccl.WithTransport("shm"), goccl.WithParam("shm.staged_min", "0"))
	require.NoError(t, err)
	id := comms[0].ID()
	stagedAllReduce(t, comms, 5000)
	require.Equal(t, uint64(6), stagedCalls(comms[0]))
	n, err := shm.RemoveSegments("", id)
	require.NoError(t, err)
	require.Zero(t, n, "names left while the area is live")
	for _, c := range comms {
		require.NoError(t, c.Close())
	}
	n, err = shm.RemoveSegments("", id)
	require.NoError(t, err)
	require.Zero(t, n, "names left after Close")
}

// TestStagedRangeFromTuneFile: a tune file's staged range for the world size bounds
// where auto stages, at both ends (counted calls, checked values); shm.staged_min or
// shm.staged_max in the config wins over the file, and a range that is off keeps
// AllReduce out of the area. The range is AllReduce's alone: AllGather and ReduceScatter
// of 1<<20-element blocks (shm.StagedGatherFor) are staged in every case. The links do not stream, so that
// the default range is the same on every host (shm.StagedMinFor).
func TestStagedRangeFromTuneFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rs ...tune.StagedRange) string {
		f := tune.NewFile(tune.Models{"shm": algos.ShmModel}, 2)
		f.Staged = rs
		p := filepath.Join(dir, name)
		require.NoError(t, tune.Save(p, f))
		return p
	}
	// 2 ranks: 16 KiB to 64 KiB; 3 ranks: off; 4 ranks: not in the file.
	file := write("models.json", tune.StagedRange{World: 2, MinBytes: 16 << 10, MaxBytes: 64 << 10}, tune.StagedRange{World: 3, Off: true})
	counts := []int{1000, 4<<10 - 1, 4 << 10, 16 << 10, 16<<10 + 1, 1 << 16, 1<<18 + 3} // bytes 4000 .. 1 MiB+12
	cases := []struct {
		name   string
		world  int
		params map[string]string
		in     func(bytes int) bool
	}{
		{"file", 2, nil, func(b int) bool { return b >= 16<<10 && b <= 64<<10 }},
		{"config min wins", 2, map[string]string{"shm.staged_min": "4K"}, func(b int) bool { return b >= 4<<10 }},
		{"config max wins", 2, map[string]string{"shm.staged_max": "512K"}, func(b int) bool { return b >= shm.StagedMinFor(2, false) && b <= 512<<10 }},
		{"file off", 3, nil, func(int) bool { return false }},
		{"not in file", 4, nil, func(b int) bool { return b >= shm.StagedMinFor(4, false) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := []goccl.Option{goccl.WithTransport("shm"), goccl.WithTuneFile(file), goccl.WithParam("shm.stream_stores", "false")}
			for k, v := range tc.params {
				opts = append(opts, goccl.WithParam(k, v))
			}
			comms := local(t, tc.world, opts...)
			want := uint64(0)
			for _, count := range counts {
				stagedAllReduce(t, comms, count)
				if tc.in(4 * count) {
					want += 6
				}
				for r, c := range comms {
					require.Equal(t, want, stagedCalls(c), "rank %d after %d bytes", r, 4*count)
				}
				name, why := comms[0].Algo(goccl.KindAllReduce, 4*count)
				require.Equal(t, tc.in(4*count), name == "staged", "%d bytes: %s (%s)", 4*count, name, why)
			}
			gatherScatter(t, comms, 1<<20) // 8 MiB of output at 2 ranks: staged at 2, 3 and 4
			for r, c := range comms {
				require.Equal(t, want+6, stagedCalls(c), "rank %d after allgather and reducescatter", r)
			}
		})
	}
}

// gatherScatter runs AllGather and ReduceScatter (sum and avg) of count float32 elements
// per rank's block on ordinary buffers on every rank, out of place and in place (send =
// recv's block, recv = send's block), and checks every element against a serial float64
// reference. Block q of rank r's input holds r*7+q*3+i%13: whole numbers, so every sum
// is exact in float32 and the average within its rounding.
func gatherScatter(t *testing.T, comms []*goccl.Comm, count int) {
	t.Helper()
	w := len(comms)
	in := func(r, q, i int) float32 { return float32(r*7 + q*3 + i%13) }
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx, r := context.Background(), c.Rank()
		for _, inPlace := range []bool{false, true} {
			// AllGather: block q of the output is rank q's input.
			all := make([]float32, w*count)
			for i := range all {
				all[i] = float32(math.NaN())
			}
			send := make([]float32, count)
			if inPlace {
				send = all[r*count : (r+1)*count]
			}
			for i := range send {
				send[i] = in(r, 0, i)
			}
			if err := c.AllGather(ctx, goccl.HostSlice(send), goccl.HostSlice(all), count, goccl.Float32); err != nil {
				return err
			}
			for q := range w {
				for i := range count {
					if got := all[q*count+i]; got != in(q, 0, i) {
						return fmt.Errorf("rank %d: allgather (in place %v, count %d): block %d element %d = %v, want %v", r, inPlace, count, q, i, got, in(q, 0, i))
					}
				}
			}
			for _, op := range []goccl.Op{goccl.Sum, goccl.Avg} {
				// ReduceScatter: rank r's output is block r of every rank's input, reduced.
				input := make([]float32, w*count)
				for q := range w {
					for i := range count {
						input[q*count+i] = in(r, q, i)
					}
				}
				out := make([]float32, count)
				if inPlace {
					out = input[r*count : (r+1)*count]
				}
				if err := c.ReduceScatter(ctx, goccl.HostSlice(input), goccl.HostSlice(out), count, goccl.Float32, op); err != nil {
					return err
				}
				for i := range count {
					want := 0.0
					for s := range w {
						want += float64(in(s, r, i))
					}
					if op == goccl.Avg {
						want /= float64(w)
					}
					if got := float64(out[i]); math.Abs(got-want) > 1e-6*math.Abs(want) {
						return fmt.Errorf("rank %d: reducescatter %v (in place %v, count %d): element %d = %v, want %v", r, op, inPlace, count, i, got, want)
					}
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// TestStagedGatherScatter: auto runs AllGather and ReduceScatter of ordinary buffers
// through the staging area from 4 MiB at 3 ranks, from 512 KiB at 4, and at 2, unless
// the links stream, from 8 MiB (shm.StagedGatherFor; sizes counted as
// nccl-tests' size column: the whole world's data), whatever shm.staged_min says (it
// bounds AllReduce), and never with it "off" (no area); named in the config, staged runs
// them at every size. Blocks of 0 to 1<<20+1 elements (odd; windows ending mid-block
// with the 4 KiB part), values checked on every rank, and Comm.Algo says what ran.
func TestStagedGatherScatter(t *testing.T) {
	for _, w := range []int{2, 3, 4} {
		for _, tc := range []struct {
			min, part, algo string
			stream          bool
		}{{"0", "4K", "", false}, {"", "", "", false}, {"", "", "", true}, {"", "", "staged", false}, {"off", "", "", false}} {
			t.Run(fmt.Sprintf("w%d/min=%q/part=%q/algo=%q/stream=%v", w, tc.min, tc.part, tc.algo, tc.stream), func(t *testing.T) {
				opts := []goccl.Option{goccl.WithTransport("shm"), goccl.WithParam("shm.stream_stores", fmt.Sprint(tc.stream))}
				if tc.min != "" {
					opts = append(opts, goccl.WithParam("shm.staged_min", tc.min))
				}
				if tc.part != "" {
					opts = append(opts, goccl.WithParam("shm.staging_bytes", tc.part))
				}
				if tc.algo != "" {
					opts = append(opts, goccl.WithAlgo(tc.algo))
				}
				comms := local(t, w, opts...)
				want := uint64(0)
				for _, count := range []int{0, 1, 7, 1000, 70001, 1<<20 + 1} {
					if raceEnabledExt && count > 1<<20 {
						// Under the detector gatherScatter's element loops at this size took
						// 40 of this test's 45-80 s; the plain run covers it.
						continue
					}
					gatherScatter(t, comms, count)
					bytes := 4 * count * w
					auto := w == 2 && !tc.stream && bytes >= 8<<20 || w == 3 && bytes >= 4<<20 || w >= 4 && bytes >= 128<<10
					staged := tc.algo == "staged" && tc.min != "off" || tc.min != "off" && bytes > 0 && auto
					if staged {
						want += 6 // allgather, reducescatter sum and avg; in and out of place
					}
					for r, c := range comms {
						require.Equal(t, want, stagedCalls(c), "rank %d after %d-element blocks", r, count)
					}
					for _, kind := range []goccl.Kind{goccl.KindAllGather, goccl.KindReduceScatter} {
						name, why := comms[0].Algo(kind, bytes)
						require.Equal(t, staged, name == "staged", "%s of %d bytes: %s (%s)", kind, bytes, name, why)
					}
				}
			})
		}
	}
}

// TestStagedBroadcast: auto broadcasts ordinary buffers through the staging area from
// shm.StagedBroadcastMinFor (16 MiB at 2 ranks, 8 MiB from 3) and not below it, from the first and the last rank,
// in place (the root's send is its recv) and not; every element is checked on every
// rank. Named in the config, staged broadcasts at every size. The links do not stream
// (with them streaming, auto never stages at 2 ranks: TestStagedBroadcastStreaming).
func TestStagedBroadcast(t *testing.T) {
	for _, w := range []int{2, 3, 4} {
		for _, algo := range []string{"", "staged"} {
			t.Run(fmt.Sprintf("w%d/algo=%q", w, algo), func(t *testing.T) {
				opts := []goccl.Option{goccl.WithTransport("shm"), goccl.WithParam("shm.stream_stores", "false")}
				if algo != "" {
					opts = append(opts, goccl.WithAlgo(algo))
				}
				comms := local(t, w, opts...)
				want := uint64(0)
				least := shm.StagedBroadcastMinFor(w, false)
				for _, count := range []int{1, 1001, least/4 - 1, least/4 + 1} { // float32 elements: just below and above it
					for _, root := range []int{0, w - 1} {
						errs := runRanks(comms, func(c *goccl.Comm) error {
							r := c.Rank()
							for _, inPlace := range []bool{false, true} {
								send, recv := make([]float32, count), make([]float32, count)
								for i := range recv {
									recv[i] = float32(math.NaN())
								}
								if r == root {
									if inPlace {
										send = recv
									}
									for i := range send {
										send[i] = float32(root*5 + i%1000)
									}
								}
								if err := c.Broadcast(context.Background(), goccl.HostSlice(send), goccl.HostSlice(recv), count, goccl.Float32, root); err != nil {
									return err
								}
								for i, got := range recv {
									if want := float32(root*5 + i%1000); got != want {
										return fmt.Errorf("rank %d: broadcast from %d of %d elements (in place %v): element %d = %v, want %v", r, root, count, inPlace, i, got, want)
									}
								}
							}
							return nil
						})
						for r, err := range errs {
							require.NoError(t, err, "rank %d", r)
						}
						if algo == "staged" || 4*count >= least {
							want += 2
						}
						for r, c := range comms {
							require.Equal(t, want, stagedCalls(c), "rank %d after %d elements from root %d", r, count, root)
						}
						name, why := comms[0].Algo(goccl.KindBroadcast, 4*count)
						require.Equal(t, algo == "staged" || 4*count >= least, name == "staged", "%d bytes: %s (%s)", 4*count, name, why)
					}
				}
			})
		}
	}
}

// TestStagedBroadcastStreaming: with streaming links, auto broadcasts through the staging
// area from 8 MiB at 3 ranks and never at 2 (shm.StagedBroadcastMinFor), and a 2-rank
// AllReduce never stages (shm.StagedMinFor); as Comm.Algo says.
func TestStagedBroadcastStreaming(t *testing.T) {
	for _, w := range []int{2, 3} {
		comms := local(t, w, goccl.WithTransport("shm"), goccl.WithParam("shm.stream_stores", "true"))
		for _, bytes := range []int{1 << 10, 8<<20 - 4, 8 << 20, 64 << 20, 1 << 30} {
			name, why := comms[0].Algo(goccl.KindBroadcast, bytes)
			require.Equal(t, w > 2 && bytes >= 8<<20, name == "staged", "%d ranks, broadcast of %d bytes: %s (%s)", w, bytes, name, why)
			name, why = comms[0].Algo(goccl.KindAllReduce, bytes)
			require.Equal(t, w > 2 && bytes >= shm.StagedMinFor(w, true), name == "staged", "%d ranks, allreduce of %d bytes: %s (%s)", w, bytes, name, why)
		}
	}
}
