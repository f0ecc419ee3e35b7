// Command testprog is one rank of the multi-host tests and benchmarks in internal/netns:
// the tests start it inside network-namespace hosts with goccl's environment
// (GOCCL_RANK, GOCCL_WORLD_SIZE, GOCCL_STORE, GOCCL_HOST_ID, GOCCL_TRANSPORT,
// GOCCL_ALGO, ...) and read what it prints, one line per event:
//
//	LINKS rank=R host=H peers=1:shm,2:tcp,...    the transport Init chose per peer
//	ALGO rank=R kind=K bytes=N algo=A why="..."   what the communicator runs
//	MODEL rank=R bytes=N auto=A                  what auto picks with the host layout
//	CHECK-OK rank=R cases=N | CHECK-FAIL rank=R ...
//	ITER rank=R iter=I | LOOP-ERROR rank=R iter=I err="..." | LOOP-DONE rank=R
//	BENCH algo=A bytes=N us=T mean_us=M busbw=B predict_us=P
//
// It imports algos/hier, so "hier" is a valid GOCCL_ALGO here whether or not the root
// package registers it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/algos"
	_ "github.com/goccl/goccl/algos/hier"
)

func main() { os.Exit(run()) }

func run() int {
	mode := flag.String("mode", "check", "check, loop or bench")
	count := flag.Int("count", 1<<18, "loop: float32 elements per AllReduce")
	limit := flag.Duration("for", time.Minute, "loop: how long to keep going")
	sizes := flag.String("sizes", "8,1K,64K,1M,16M", "bench: buffer sizes in bytes (K, M suffixes)")
	iters := flag.Int("iters", 20, "bench: timed iterations per size")
	algoList := flag.String("algos", "ring,tree,hier", "bench: algorithms to time")
	flag.Parse()

	ctx := context.Background()
	comm, err := goccl.Init(ctx, goccl.FromEnv())
	if err != nil {
		fmt.Printf("INIT-ERROR err=%q\n", err.Error())
		return 1
	}
	defer comm.Close()
	printLinks(comm)
	switch *mode {
	case "check":
		return check(ctx, comm)
	case "loop":
		return loop(ctx, comm, *count, *limit)
	case "bench":
		return bench(ctx, comm, *sizes, *algoList, *iters)
	}
	fmt.Printf("testprog: unknown -mode %q (valid: check, loop, bench)\n", *mode)
	return 2
}

func printLinks(c *goccl.Comm) {
	var peers []string
	for p := range c.Size() {
		if p != c.Rank() {
			peers = append(peers, fmt.Sprintf("%d:%s", p, c.TransportOf(p)))
		}
	}
	fmt.Printf("LINKS rank=%d host=%s peers=%s\n", c.Rank(), c.Host(), strings.Join(peers, ","))
}

// hostModel is the cost model of c's layout with the default shm and tcp link models:
// what the root package's selector would use once it passes the host layout on.
func hostModel(c *goccl.Comm) algos.CostModel {
	hosts := make([]string, c.Size())
	for r := range hosts {
		hosts[r] = c.PeerHost(r)
	}
	m := algos.HostModel(algos.ShmModel, algos.TCPModel, algos.LayoutOf(hosts))
	m.ChunkBytes = c.Config().ChunkBytes
	return m
}

// loop runs float32-sum AllReduces until one fails (the test cuts a host's link) or
// the time is up, checking every result.
func loop(ctx context.Context, c *goccl.Comm, count int, limit time.Duration) int {
	buf := make([]float32, count)
	w := float32(c.Size())
	deadline := time.Now().Add(limit)
	for i := 0; time.Now().Before(deadline); i++ {
		for j := range buf {
			buf[j] = 1
		}
		if err := goccl.AllReduceSlice(ctx, c, buf, goccl.Sum); err != nil {
			fmt.Printf("LOOP-ERROR rank=%d iter=%d err=%q\n", c.Rank(), i, err.Error())
			return 1
		}
		for j, v := range buf {
			if v != w {
				fmt.Printf("LOOP-WRONG rank=%d iter=%d elem=%d got=%v want=%v\n", c.Rank(), i, j, v, w)
				return 1
			}
		}
		fmt.Printf("ITER rank=%d iter=%d\n", c.Rank(), i)
	}
	fmt.Printf("LOOP-DONE rank=%d\n", c.Rank())
	return 0
}

// bench times out-of-place float32-sum AllReduce for each size and algorithm. The
// algorithms take turns call by call, so drifting load on a shared machine hits them
// alike; rank 0 prints the median call time (robust to a descheduled rank), the mean,
// nccl-tests' busbw (algbw x 2(W-1)/W) from the median, and the host model's prediction.
func bench(ctx context.Context, c *goccl.Comm, sizeList, algoList string, iters int) int {
	var sizes []int
	for _, f := range strings.Split(sizeList, ",") {
		n, err := algos.ParseSize(f)
		if err != nil {
			fmt.Println("testprog:", err)
			return 2
		}
		sizes = append(sizes, n/4*4)
	}
	algs := strings.Split(algoList, ",")
	w := c.Size()
	m := hostModel(c)
	fail := func(alg string, n int, err error) int {
		fmt.Printf("BENCH-ERROR algo=%s bytes=%d err=%q\n", alg, n, err.Error())
		return 1
	}
	for _, n := range sizes {
		send, recv := make([]byte, n), make([]byte, n)
		samples := make([][]float64, len(algs))
		for it := -2; it < iters; it++ { // two warm-up rounds
			for i, alg := range algs {
				if err := c.SetAlgo(alg); err != nil {
					return fail(alg, n, err)
				}
				if err := c.Barrier(ctx); err != nil {
					return fail(alg, n, err)
				}
				start := time.Now()
				if err := c.AllReduce(ctx, goccl.Host(send), goccl.Host(recv), n/4, goccl.Float32, goccl.Sum); err != nil {
					return fail(alg, n, err)
				}
				if it >= 0 {
					samples[i] = append(samples[i], time.Since(start).Seconds())
				}
			}
		}
		if c.Rank() != 0 {
			continue
		}
		for i, alg := range algs {
			xs := samples[i]
			slices.Sort(xs)
			med, mean := xs[len(xs)/2], 0.0
			for _, x := range xs {
				mean += x / float64(len(xs))
			}
			p, _ := m.Predict(alg, goccl.KindAllReduce, n, w)
			fmt.Printf("BENCH algo=%s bytes=%d us=%.1f mean_us=%.1f busbw=%.3f predict_us=%.1f\n", alg, n, med*1e6, mean*1e6,
				float64(n)/med/1e9*2*float64(w-1)/float64(w), p.Seconds()*1e6)
		}
	}
	return 0
}
