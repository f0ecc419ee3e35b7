package goccl_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
)

// rd's AllGather and ReduceScatter over real links, in each of its schedules (algos/rd's
// pairwise): blocks up to 16 KiB in one step; at 3 ranks (shm) larger ones step by
// step, within the links' eager size (1 MiB) on the caller's goroutine and past it on a
// sending and a receiving goroutine; at 4 and 8 ranks (shm, tcp) larger ones by
// recursive doubling and halving (algos.PairwiseHalves), whose pieces of 1 to W/2
// blocks take both of swap's paths. The algostest matrix runs rd over links whose
// eager size is the 16 KiB floor, where the eager paths never run. Values are checked
// on every rank, in place and not, for sum and avg (gatherScatter).
func TestRDPairwiseOverLinks(t *testing.T) {
	for _, tc := range []struct {
		transport string
		world     int
		counts    []int
	}{
		{"shm", 3, []int{1, 13, algos.PairwiseOneStepMax / 4, algos.PairwiseOneStepMax/4 + 1, 70001, 300001}},
		{"shm", 4, []int{1, 13, algos.PairwiseOneStepMax / 4, algos.PairwiseOneStepMax/4 + 1, 70001, 300001}},
		{"tcp", 4, []int{algos.PairwiseOneStepMax/4 + 1, 70001, 300001}},
		{"shm", 8, []int{algos.PairwiseOneStepMax/4 + 1, 70001}},
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.transport, tc.world), func(t *testing.T) {
			comms := local(t, tc.world, goccl.WithTransport(tc.transport), goccl.WithAlgo("rd"), goccl.WithParam("shm.staged_min", "off"))
			for _, count := range tc.counts {
				gatherScatter(t, comms, count)
				for _, kind := range []goccl.Kind{goccl.KindAllGather, goccl.KindReduceScatter} {
					name, why := comms[0].Algo(kind, 4*count*tc.world)
					require.Equal(t, "rd", name, "%s of %d-element blocks: %s", kind, count, why)
				}
				halves := tc.world != 3 && count > algos.PairwiseOneStepMax/4
				require.Equal(t, halves, algos.PairwiseHalves(4*count, tc.world, 512<<10, 1<<20), "count %d", count)
			}
		})
	}
}

// rd's AllReduce past one eager message at 4 and 5 ranks is recursive halving and
// doubling (algos.RDHalves; at 5 the fifth rank folds in and out), over real shm and
// tcp links whose eager size is 1 MiB: counts that leave halves, quarters and the
// pipelined chunks uneven, every rank's values against a float64 reference, sum, avg
// and max, in place and out of place.
func TestRDHalvingOverLinks(t *testing.T) {
	for _, tc := range []struct {
		transport string
		world     int
	}{{"shm", 4}, {"shm", 5}, {"tcp", 4}} {
		t.Run(fmt.Sprintf("%s-%d", tc.transport, tc.world), func(t *testing.T) {
			comms := local(t, tc.world, goccl.WithTransport(tc.transport), goccl.WithAlgo("rd"))
			for _, count := range []int{1<<18 + 1, 3<<18 + 7} { // 1 MiB + 4 and 3 MiB + 28 bytes
				require.True(t, algos.RDHalves(4*count, tc.world, 512<<10, 1<<20), "count %d", count)
				allReduceValues(t, comms, count)
			}
		})
	}
}

// allReduceValues runs AllReduce of count float32 elements (sum, avg, max) on every
// rank, out of place and in place, and checks every element against a float64
// reference: rank r's element i is (i*7+r*13)%1001-500, whole numbers whose sums are
// exact in float32.
func allReduceValues(t *testing.T, comms []*goccl.Comm, count int) {
	t.Helper()
	w := len(comms)
	in := func(r, i int) float32 { return float32((i*7+r*13)%1001 - 500) }
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx, r := context.Background(), c.Rank()
		for _, op := range []goccl.Op{goccl.Sum, goccl.Avg, goccl.Max} {
			for _, inPlace := range []bool{false, true} {
				send := make([]float32, count)
				for i := range send {
					send[i] = in(r, i)
				}
				recv := send
				if !inPlace {
					recv = make([]float32, count)
				}
				if err := c.AllReduce(ctx, goccl.HostSlice(send), goccl.HostSlice(recv), count, goccl.Float32, op); err != nil {
					return err
				}
				for i, got := range recv {
					want := float64(in(0, i))
					for q := 1; q < w; q++ {
						switch v := float64(in(q, i)); op {
						case goccl.Max:
							want = math.Max(want, v)
						default:
							want += v
						}
					}
					if op == goccl.Avg {
						want /= float64(w)
					}
					if math.Abs(float64(got)-want) > 1e-6*math.Abs(want) {
						return fmt.Errorf("rank %d: %v (in place %v, count %d): element %d = %v, want %v", r, op, inPlace, count, i, got, want)
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
