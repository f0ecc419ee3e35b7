// Command lat times a loop of small AllReduce calls through the SDK, for A/B comparisons
// of the call path (BENCHMARKS.md, "Speed"): each rank of a launcher runs it, rank 0
// prints the mean time per call.
//
//	go build -o /tmp/lat ./bench/lat
//	goccl run -n 2 -- /tmp/lat -mode sync -count 2 -n 300000
//
// -mode sync calls AllReduce (blocking), async calls AllReduceAsync and waits for each,
// burst issues -bw calls and then waits for them; -op sendrecv times SendRecv to the next
// rank from the previous instead (in place, or with -oop into another buffer), and -op
// pingpong a round trip of Send and Recv between ranks 0 and 1 (-mode sync only); -prof
// PREFIX writes a CPU profile per rank (PREFIX.RANK) of the timed loop. The transport and
// every other setting come from the GOCCL_* environment, as in any goccl program.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/goccl/goccl"
)

func main() {
	n := flag.Int("n", 20000, "timed calls")
	mode := flag.String("mode", "sync", "sync, async or burst")
	prof := flag.String("prof", "", "CPU profile prefix (one file per rank)")
	bw := flag.Int("bw", 20, "calls per burst (-mode burst)")
	count := flag.Int("count", 2, "float32 elements per call")
	op := flag.String("op", "allreduce", "allreduce, sendrecv, pingpong, barrier or broadcast (root 0)")
	oop := flag.Bool("oop", false, "out of place (another output buffer)")
	flag.Parse()
	if err := run(*n, *mode, *prof, *op, *oop, *bw, *count); err != nil {
		fmt.Fprintln(os.Stderr, "lat:", err)
		os.Exit(1)
	}
}

func run(n int, mode, prof, op string, oop bool, bw, count int) error {
	if mode != "sync" && mode != "async" && mode != "burst" {
		return fmt.Errorf("-mode %q: want sync, async or burst", mode)
	}
	if op != "allreduce" && op != "sendrecv" && op != "pingpong" && op != "barrier" && op != "broadcast" || (op == "pingpong" || op == "barrier" || op == "broadcast") && mode != "sync" {
		return fmt.Errorf("-op %q -mode %q: want -op allreduce or sendrecv, or pingpong, barrier or broadcast with -mode sync", op, mode)
	}
	if n < 1 || bw < 1 || count < 0 || (mode == "burst" && n%bw != 0) {
		return fmt.Errorf("-n %d, -bw %d, -count %d: want n >= 1, bw >= 1, count >= 0, and n a multiple of bw for -mode burst", n, bw, count)
	}
	ctx := context.Background()
	c, err := goccl.Init(ctx, goccl.FromEnv())
	if err != nil {
		return err
	}
	defer c.Close()
	xs := make([]float32, count)
	for i := range xs {
		xs[i] = float32(i % 7)
	}
	buf, out := goccl.HostSlice(xs), goccl.HostSlice(xs)
	if oop {
		out = goccl.HostSlice(make([]float32, count))
	}
	next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
	call := func() error {
		switch {
		case op == "pingpong" && c.Rank() == 0:
			if err := c.Send(ctx, buf, count, goccl.Float32, 1); err != nil {
				return err
			}
			return c.Recv(ctx, out, count, goccl.Float32, 1)
		case op == "pingpong" && c.Rank() == 1:
			if err := c.Recv(ctx, out, count, goccl.Float32, 0); err != nil {
				return err
			}
			return c.Send(ctx, buf, count, goccl.Float32, 0)
		case op == "pingpong":
			return nil
		case op == "sendrecv":
			return c.SendRecv(ctx, buf, next, out, prev, count, goccl.Float32)
		case op == "barrier":
			return c.Barrier(ctx)
		case op == "broadcast":
			return c.Broadcast(ctx, buf, out, count, goccl.Float32, 0)
		}
		return c.AllReduce(ctx, buf, out, count, goccl.Float32, goccl.Sum)
	}
	issue := func() *goccl.Work {
		if op == "sendrecv" {
			return c.SendRecvAsync(ctx, buf, next, out, prev, count, goccl.Float32)
		}
		return c.AllReduceAsync(ctx, buf, out, count, goccl.Float32, goccl.Sum)
	}
	ws := make([]*goccl.Work, bw)
	loop := func(k int) error {
		switch mode {
		case "sync":
			for range k {
				if err := call(); err != nil {
					return err
				}
			}
		case "async":
			for range k {
				if err := issue().Wait(ctx); err != nil {
					return err
				}
			}
		case "burst":
			for i := 0; i < k; i += bw {
				for j := range ws {
					ws[j] = issue()
				}
				for _, w := range ws {
					if err := w.Wait(ctx); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := loop(bw * max(1, 1000/bw)); err != nil { // warm-up
		return err
	}
	if prof != "" {
		f, err := os.Create(fmt.Sprintf("%s.%d", prof, c.Rank()))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	t := time.Now()
	if err := loop(n); err != nil {
		return err
	}
	d := time.Since(t)
	if c.Rank() == 0 {
		fmt.Printf("%s %s: %.2f us/op\n", op, mode, float64(d.Nanoseconds())/1e3/float64(n))
	}
	return nil
}
