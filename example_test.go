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
