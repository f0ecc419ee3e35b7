package goccl_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
)

// rd's AllGather and ReduceScatter over real shm links at 3 and 4 ranks, in each of its
// three schedules (algos/rd's pairwise): blocks up to 16 KiB in one step, larger ones
// within the links' eager size (1 MiB over shm) step by step on the caller's goroutine,
// and larger still on a sending and a receiving goroutine. The algostest matrix runs rd
// over links whose eager size is the 16 KiB floor, where the middle schedule never
// runs. Values are checked on every rank, in place and not, for sum and avg
// (gatherScatter).
func TestRDPairwiseOverShm(t *testing.T) {
	for _, w := range []int{3, 4} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			comms := local(t, w, goccl.WithTransport("shm"), goccl.WithAlgo("rd"), goccl.WithParam("shm.staged_min", "off"))
			for _, count := range []int{1, 13, algos.PairwiseOneStepMax / 4, algos.PairwiseOneStepMax/4 + 1, 70001, 300001} {
				gatherScatter(t, comms, count)
				for _, kind := range []goccl.Kind{goccl.KindAllGather, goccl.KindReduceScatter} {
					name, why := comms[0].Algo(kind, 4*count*w)
					require.Equal(t, "rd", name, "%s of %d-element blocks: %s", kind, count, why)
				}
			}
		})
	}
}
