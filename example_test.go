package goccl_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/goccl/goccl"
)

// Four goroutine ranks sum their rank numbers with AllReduce. A real program calls
// goccl.Init(ctx, goccl.FromEnv()) once per process and is started by `goccl run -n 4`.
func Example() {
	ctx := context.Background()
	comms, err := goccl.InitLocal(ctx, 4)
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	out := make([]float32, 4)
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			xs := []float32{float32(c.Rank())}
			if err := goccl.AllReduceSlice(ctx, c, xs, goccl.Sum); err != nil {
				panic(err)
			}
			out[c.Rank()] = xs[0]
		}()
	}
	wg.Wait()
	fmt.Println(out)
	// Output: [6 6 6 6]
}

// Split makes sub-communicators, like ncclCommSplit.
func ExampleComm_Split() {
	ctx := context.Background()
	comms, _ := goccl.InitLocal(ctx, 4)
	var wg sync.WaitGroup
	sizes := make([]int, 4)
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			sub, err := c.Split(ctx, c.Rank()%2, c.Rank())
			if err != nil {
				panic(err)
			}
			defer sub.Close()
			sizes[c.Rank()] = sub.Size()
		}()
	}
	wg.Wait()
	fmt.Println(sizes)
	// Output: [2 2 2 2]
}

// AllToAllV sends each rank a block of its own size, as a mixture-of-experts layer
// sends tokens to experts: here rank r sends rank p r+p copies of its rank number.
func ExampleComm_AllToAllV() {
	ctx := context.Background()
	comms, _ := goccl.InitLocal(ctx, 3)
	var wg sync.WaitGroup
	got := make([][]int32, 3)
	for _, c := range comms {
		wg.Go(func() {
			defer c.Close()
			r, w := c.Rank(), c.Size()
			var send []int32
			sendCounts, recvCounts := make([]int, w), make([]int, w)
			for p := range w {
				sendCounts[p], recvCounts[p] = r+p, p+r
				for range r + p {
					send = append(send, int32(r))
				}
			}
			recv := make([]int32, 3*r+3) // (0+r) + (1+r) + (2+r)
			if err := goccl.AllToAllVSlice(ctx, c, send, sendCounts, recv, recvCounts); err != nil {
				panic(err)
			}
			got[r] = recv
		})
	}
	wg.Wait()
	fmt.Println(got)
	// Output: [[1 2 2] [0 1 1 2 2 2] [0 0 1 1 1 2 2 2 2]]
}

// BatchSendRecv runs a rank's sends and receives with several peers at once, like
// torch.distributed.batch_isend_irecv: each rank sends to both neighbours in a ring
// and receives from both, in any order.
func ExampleComm_BatchSendRecv() {
	ctx := context.Background()
	comms, _ := goccl.InitLocal(ctx, 4)
	var wg sync.WaitGroup
	got := make([][2]float64, 4)
	for _, c := range comms {
		wg.Go(func() {
			defer c.Close()
			r, w := c.Rank(), c.Size()
			next, prev := (r+1)%w, (r+w-1)%w
			mine := []float64{float64(r)}
			fromPrev, fromNext := make([]float64, 1), make([]float64, 1)
			err := c.BatchSendRecv(ctx, []goccl.P2POp{
				goccl.SendOp(goccl.HostSlice(mine), 1, goccl.Float64, next),
				goccl.SendOp(goccl.HostSlice(mine), 1, goccl.Float64, prev),
				goccl.RecvOp(goccl.HostSlice(fromPrev), 1, goccl.Float64, prev),
				goccl.RecvOp(goccl.HostSlice(fromNext), 1, goccl.Float64, next),
			})
			if err != nil {
				panic(err)
			}
			got[r] = [2]float64{fromPrev[0], fromNext[0]}
		})
	}
	wg.Wait()
	fmt.Println(got)
	// Output: [[3 1] [0 2] [1 3] [2 0]]
}
