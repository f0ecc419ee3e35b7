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
// pingpong a round trip of Send and Recv between ranks 0 and 1, -op barrier a Barrier,
// and -op broadcast a Broadcast from rank 0 (these three -mode sync only); -op reduce
// (sum to rank 0), gather and scatter (root 0), allgather, reducescatter (sum) and
// alltoall time those collectives with -count elements per rank's block, out of place
// whatever -oop says, -op alltoallv the same AllToAll as AllToAllV with equal counts,
// and -op neighbors a BatchSendRecv that sends -count elements to the next and the
// previous rank and receives theirs (-mode sync only); -prof PREFIX
// writes a CPU profile per rank (PREFIX.RANK) of the timed loop. -warm calls come
// first, untimed. After the timed calls one more call runs on inputs whose result is
// known, and lat fails if any rank got another. The transport and every other setting
// come from the GOCCL_* environment, as in any goccl program. bench/lat.sh runs it
// against Open MPI's bench/mpi_lat.c.
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
	op := flag.String("op", "allreduce", "allreduce, sendrecv, pingpong, barrier, broadcast, reduce, gather, scatter (root 0), allgather, reducescatter, alltoall, alltoallv or neighbors")
	oop := flag.Bool("oop", false, "out of place (another output buffer)")
	warm := flag.Int("warm", 1000, "untimed calls first")
	flag.Parse()
	if err := run(*n, *warm, *mode, *prof, *op, *oop, *bw, *count); err != nil {
		fmt.Fprintln(os.Stderr, "lat:", err)
		os.Exit(1)
	}
}

func run(n, warm int, mode, prof, op string, oop bool, bw, count int) error {
	if mode != "sync" && mode != "async" && mode != "burst" {
		return fmt.Errorf("-mode %q: want sync, async or burst", mode)
	}
	syncOnly := map[string]bool{"pingpong": true, "barrier": true, "broadcast": true, "reduce": true, "gather": true, "scatter": true,
		"allgather": true, "reducescatter": true, "alltoall": true, "alltoallv": true, "neighbors": true}
	if op != "allreduce" && op != "sendrecv" && !syncOnly[op] || syncOnly[op] && mode != "sync" {
		return fmt.Errorf("-op %q -mode %q: want -op allreduce or sendrecv, or pingpong, barrier, broadcast, reduce, gather, scatter, allgather, reducescatter, alltoall, alltoallv or neighbors with -mode sync", op, mode)
	}
	if n < 1 || warm < 0 || bw < 1 || count < 0 || (mode == "burst" && n%bw != 0) {
		return fmt.Errorf("-n %d, -warm %d, -bw %d, -count %d: want n >= 1, warm >= 0, bw >= 1, count >= 0, and n a multiple of bw for -mode burst", n, warm, bw, count)
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
	ys := xs // the output
	if oop {
		ys = make([]float32, count)
	}
	switch op { // blocks of count elements, out of place
	case "reduce":
		ys = make([]float32, count)
	case "allgather", "gather":
		ys = make([]float32, c.Size()*count)
	case "scatter":
		xs, ys = make([]float32, c.Size()*count), make([]float32, count)
	case "reducescatter":
		xs, ys = make([]float32, c.Size()*count), make([]float32, count)
	case "alltoall", "alltoallv":
		xs, ys = make([]float32, c.Size()*count), make([]float32, c.Size()*count)
	case "neighbors":
		ys = make([]float32, 2*count)
	}
	buf, out := goccl.HostSlice(xs), goccl.HostSlice(ys)
	next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
	counts := make([]int, c.Size())
	for i := range counts {
		counts[i] = count
	}
	var ops []goccl.P2POp
	if op == "neighbors" {
		ops = []goccl.P2POp{
			goccl.RecvOp(goccl.HostSlice(ys[:count]), count, goccl.Float32, prev),
			goccl.RecvOp(goccl.HostSlice(ys[count:]), count, goccl.Float32, next),
			goccl.SendOp(buf, count, goccl.Float32, next),
			goccl.SendOp(buf, count, goccl.Float32, prev),
		}
	}
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
		case op == "reduce":
			return c.Reduce(ctx, buf, out, count, goccl.Float32, goccl.Sum, 0)
		case op == "gather":
			return c.Gather(ctx, buf, out, count, goccl.Float32, 0)
		case op == "scatter":
			return c.Scatter(ctx, buf, out, count, goccl.Float32, 0)
		case op == "allgather":
			return c.AllGather(ctx, buf, out, count, goccl.Float32)
		case op == "reducescatter":
			return c.ReduceScatter(ctx, buf, out, count, goccl.Float32, goccl.Sum)
		case op == "alltoall":
			return c.AllToAll(ctx, buf, out, count, goccl.Float32)
		case op == "alltoallv":
			return c.AllToAllV(ctx, buf, counts, out, counts, goccl.Float32)
		case op == "neighbors":
			return c.BatchSendRecv(ctx, ops)
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
	if mode == "burst" {
		warm = bw * max(1, warm/bw)
	}
	if err := loop(warm); err != nil {
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
	pprof.StopCPUProfile()
	if err := check(c, op, xs, ys, call); err != nil {
		return err
	}
	if c.Rank() == 0 {
		fmt.Printf("%s %s: %.2f us/op\n", op, mode, float64(d.Nanoseconds())/1e3/float64(n))
	}
	return nil
}

// check runs call once more on inputs whose result is known (element i of rank r is
// r*1000+i) and returns an error unless this rank got it: the sum over the ranks for an
// AllReduce, the previous rank's input for a SendRecv, rank 1's for a ping-pong with
// -oop and rank 0's own without (checked on rank 0), rank 0's for a Broadcast, and for
// Reduce, Gather and Scatter (root 0), AllGather, ReduceScatter and AllToAll their
// definitions over blocks of count elements.
// out is the output (xs itself without -oop).
func check(c *goccl.Comm, op string, xs, out []float32, call func() error) error {
	r, w := c.Rank(), c.Size()
	count := len(out) / w // a block, for the block collectives
	if op == "neighbors" {
		count = len(xs)
	}
	in := func(rank, i int) float32 { return float32(rank*1000 + i) }
	for i := range xs {
		xs[i] = in(r, i)
	}
	if err := call(); err != nil {
		return err
	}
	for i, x := range out {
		var want float32
		switch op {
		case "allreduce":
			want = float32(1000*w*(w-1)/2 + w*i)
		case "sendrecv":
			want = in((r+w-1)%w, i)
		case "pingpong":
			if r != 0 {
				return nil
			}
			want = in(1, i)
			if &out[0] == &xs[0] { // in place, rank 1 sends back what it received
				want = in(0, i)
			}
		case "broadcast":
			want = in(0, i)
		case "reduce", "gather":
			if r != 0 {
				return nil // only the root has a result
			}
			if op == "reduce" {
				want = float32(1000*w*(w-1)/2 + w*i)
			} else {
				want = in(i/count, i%count)
			}
		case "scatter":
			want = in(0, r*len(out)+i)
		case "allgather":
			want = in(i/count, i%count)
		case "reducescatter":
			want = float32(1000*w*(w-1)/2 + w*(r*len(out)+i))
		case "alltoall", "alltoallv":
			want = in(i/count, r*count+i%count)
		case "neighbors": // from the previous rank, then from the next
			from := (r + w - 1) % w
			if i >= count {
				from = (r + 1) % w
			}
			want = in(from, i%count)
		default:
			return nil
		}
		if x != want {
			return fmt.Errorf("rank %d: %s: element %d is %v, want %v", r, op, i, x, want)
		}
	}
	return nil
}
