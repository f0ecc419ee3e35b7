package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/transport"
)

func main() { os.Exit(run()) }

func run() int {
	mode := flag.String("mode", "matrix", "scenario: matrix, p2p, fault, mismatch, auth, hold")
	kinds := flag.String("kinds", "allreduce,reduce,broadcast,allgather,reducescatter,gather,scatter,alltoall,barrier,sendrecv", "matrix: collectives")
	dtypes := flag.String("dtypes", "int32,float32,bfloat16,float64", "matrix: element types")
	ops := flag.String("ops", "sum,prod,max,min,avg", "matrix: reduction ops")
	counts := flag.String("counts", "0,1,7,W+1", "matrix: counts (W = world size)")
	large := flag.String("large", "allreduce", "matrix: collectives that also get a >= 4M-element case")
	kind := flag.String("kind", "allreduce", "fault: the collective to loop on")
	limit := flag.Duration("for", 30*time.Second, "fault, hold: how long to loop")
	mcase := flag.String("case", "kind", "mismatch: kind, count, dtype, op, root, skip, skipsame, skiplast")
	odd := flag.Int("odd", -1, "mismatch: the deviating rank (-1: the last)")
	corrupt := flag.Bool("corrupt", false, "matrix: flip one output byte per call (a control: the check must fail)")
	shared := flag.Bool("shared", false, "matrix, fault: buffers in memory from AllocShared")
	flag.Parse()

	opts := []goccl.Option{}
	// Per-rank overrides the launcher cannot express (it gives every rank one environment).
	if v := os.Getenv("E2E_STORE"); v != "" {
		opts = append(opts, goccl.WithStoreAddr(v))
	}
	cfg := goccl.FromEnv(opts...)
	if v, ok := os.LookupEnv("E2E_TOKEN"); ok && strconv.Itoa(cfg.Rank) == os.Getenv("E2E_TOKEN_RANK") {
		cfg = cfg.Apply(goccl.WithAuthToken(v))
	}
	if *mode == "fault" {
		// The launcher stops the other ranks once one dies; ignore its SIGTERM so this
		// rank shows how it finds out by itself (as it must when ranks are on other hosts).
		signal.Ignore(syscall.SIGTERM)
	}
	if d, err := time.ParseDuration(os.Getenv("E2E_DELAY")); err == nil && strconv.Itoa(cfg.Rank) == os.Getenv("E2E_DELAY_RANK") {
		time.Sleep(d) // a late rank: the others wait in Init with their listeners open
	}
	ctx := context.Background()
	start := time.Now()
	comm, err := goccl.Init(ctx, cfg)
	if *mode == "auth" {
		return reportAuth(ctx, cfg.Rank, comm, err)
	}
	if err != nil {
		fmt.Printf("INIT-ERROR rank=%d ms=%d err=%q\n", cfg.Rank, time.Since(start).Milliseconds(), err.Error())
		return 1
	}
	defer comm.Close()
	switch *mode {
	case "matrix":
		w := comm.Size()
		cs, err := parseCounts(*counts, w)
		if err != nil {
			fmt.Println("rankprog:", err)
			return 2
		}
		ks, err1 := parseList(*kinds, transport.ParseKind)
		ds, err2 := parseList(*dtypes, transport.ParseDType)
		os_, err3 := parseList(*ops, transport.ParseOp)
		lk, err4 := parseList(*large, transport.ParseKind)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			fmt.Println("rankprog:", err)
			return 2
		}
		lm := map[goccl.Kind]bool{}
		for _, k := range lk {
			lm[k] = true
		}
		return runMatrix(ctx, comm, plan(ks, ds, os_, cs, lm, w), *corrupt, *shared)
	case "p2p":
		return runP2P(ctx, comm)
	case "fault":
		if *kind != "alltoallv" && *kind != "batch" {
			if _, err := transport.ParseKind(*kind); err != nil {
				fmt.Println("rankprog:", err, "(or alltoallv, batch)")
				return 2
			}
		}
		return runFault(ctx, comm, *kind, *limit, *shared)
	case "mismatch":
		o := *odd
		if o < 0 {
			o = comm.Size() - 1
		}
		return runMismatch(ctx, comm, *mcase, o)
	case "hold":
		return runHold(ctx, comm, *limit)
	}
	fmt.Printf("rankprog: unknown -mode %q (valid: matrix, p2p, fault, mismatch, auth, hold)\n", *mode)
	return 2
}

func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := parse(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// parseCounts reads counts where "W" stands for the world size ("W+1", "3W-1").
func parseCounts(s string, w int) ([]int, error) {
	return parseList(s, func(f string) (int, error) {
		if a, b, ok := strings.Cut(f, "W"); ok {
			k := 1
			if a != "" {
				var err error
				if k, err = strconv.Atoi(a); err != nil {
					return 0, fmt.Errorf("count %q: %w", f, err)
				}
			}
			d := 0
			if b != "" {
				var err error
				if d, err = strconv.Atoi(b); err != nil {
					return 0, fmt.Errorf("count %q: %w", f, err)
				}
			}
			return k*w + d, nil
		}
		return strconv.Atoi(f)
	})
}

// faultSizes are the element counts the fault loop cycles through, so a kill lands in
// small latency-bound calls and in large pipelined ones.
var faultSizes = []int{1, 1000, 64 << 10, 1<<20 + 3}

// runFault loops on one collective until it fails, which the test causes by killing a
// rank. It reports when the failure was seen, so the test can measure detection latency.
func runFault(ctx context.Context, comm *goccl.Comm, kind string, limit time.Duration, shared bool) int {
	r, w := comm.Rank(), comm.Size()
	big := faultSizes[len(faultSizes)-1]
	send := make([]float32, big*w)
	recv := make([]float32, big*w)
	if shared {
		mem, err := comm.AllocShared(ctx, 2*4*big*w)
		if err != nil {
			fmt.Printf("FAULT rank=%d t=%d iter=0 err=%q\n", r, time.Now().UnixNano(), err.Error())
			return 1
		}
		all := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(mem))), 2*big*w)
		send, recv = all[:big*w], all[big*w:]
	}
	for i := range send {
		send[i] = float32(r + 1)
	}
	k, _ := transport.ParseKind(kind)
	call := func(n int) error {
		s, rv := goccl.HostSlice(send[:n]), goccl.HostSlice(recv[:n*w])
		switch {
		case kind == "alltoallv": // blocks of n/1, n/2 or n/3 elements
			counts := make([]int, w) // count(src, dst) is symmetric: the send and the recv counts
			for p := range counts {
				counts[p] = n / (1 + (r+p)%3)
			}
			return comm.AllToAllV(ctx, goccl.HostSlice(send[:n*w]), counts, rv, counts, goccl.Float32)
		case kind == "batch": // to and from both ring neighbours
			next, prev := (r+1)%w, (r+w-1)%w
			return comm.BatchSendRecv(ctx, []goccl.P2POp{
				goccl.RecvOp(goccl.HostSlice(recv[:n]), n, goccl.Float32, prev),
				goccl.RecvOp(goccl.HostSlice(recv[n:2*n]), n, goccl.Float32, next),
				goccl.SendOp(s, n, goccl.Float32, next),
				goccl.SendOp(s, n, goccl.Float32, prev),
			})
		case k == goccl.KindBroadcast:
			return comm.Broadcast(ctx, s, goccl.HostSlice(recv[:n]), n, goccl.Float32, 0)
		case k == goccl.KindAllGather:
			return comm.AllGather(ctx, s, rv, n, goccl.Float32)
		case k == goccl.KindBarrier:
			return comm.Barrier(ctx)
		case k == goccl.KindSendRecv: // a ring shift
			return comm.SendRecv(ctx, s, (r+1)%w, goccl.HostSlice(recv[:n]), (r+w-1)%w, n, goccl.Float32)
		}
		return comm.AllReduce(ctx, s, goccl.HostSlice(recv[:n]), n, goccl.Float32, goccl.Sum)
	}
	if err := call(1); err != nil {
		fmt.Printf("FAULT rank=%d t=%d iter=0 err=%q\n", r, time.Now().UnixNano(), err.Error())
		return 1
	}
	fmt.Printf("READY rank=%d pid=%d comm=%s\n", r, os.Getpid(), comm.ID())
	end := time.Now().Add(limit)
	for it := 1; time.Now().Before(end); it++ {
		if err := call(faultSizes[it%len(faultSizes)]); err != nil {
			t := time.Now().UnixNano()
			fmt.Printf("FAULT rank=%d t=%d iter=%d err=%q\n", r, t, it, err.Error())
			cs := time.Now()
			cerr := comm.Close()
			fmt.Printf("CLOSED rank=%d ms=%d err=%v\n", r, time.Since(cs).Milliseconds(), cerr)
			return 1
		}
	}
	fmt.Printf("NOFAULT rank=%d\n", r)
	return 3
}

// runMismatch makes rank odd deviate in the second of three calls and reports each
// rank's outcome. It exits 0 either way: the test judges the outcomes.
func runMismatch(ctx context.Context, comm *goccl.Comm, kind string, odd int) int {
	r := comm.Rank()
	me := r == odd
	const n = 1000
	a := make([]float32, 2*n*comm.Size())
	b := make([]float32, 2*n*comm.Size())
	ai := make([]int32, 2*n)
	allreduce := func(cnt int, op goccl.Op) error {
		return comm.AllReduce(ctx, goccl.HostSlice(a[:cnt]), goccl.HostSlice(b[:cnt]), cnt, goccl.Float32, op)
	}
	bcast := func(root int) error {
		return comm.Broadcast(ctx, goccl.HostSlice(a[:n]), goccl.HostSlice(b[:n]), n, goccl.Float32, root)
	}
	allgather := func() error {
		return comm.AllGather(ctx, goccl.HostSlice(a[:n]), goccl.HostSlice(b[:n*comm.Size()]), n, goccl.Float32)
	}
	second := func() error { return allreduce(n, goccl.Sum) }
	third := allgather
	switch kind {
	case "kind":
		if me {
			second = func() error { return bcast(0) }
		}
	case "count":
		if me {
			second = func() error { return allreduce(n+1, goccl.Sum) }
		}
	case "dtype":
		if me {
			second = func() error {
				return comm.AllReduce(ctx, goccl.HostSlice(ai[:n]), goccl.HostSlice(ai[n:]), n, goccl.Int32, goccl.Sum)
			}
		}
	case "op":
		if me {
			second = func() error { return allreduce(n, goccl.Max) }
		}
	case "root":
		second = func() error { return bcast(0) }
		if me {
			second = func() error { return bcast(1) }
		}
	case "skip": // the odd rank skips the second call and runs the third in its place
		if me {
			second = nil
		}
	case "skipsame": // three identical calls; the odd rank makes two and leaves
		third = func() error { return allreduce(n, goccl.Sum) }
		if me {
			second = nil
		}
	case "skiplast": // the odd rank never makes the last call but stays alive
		third = func() error { return allreduce(n, goccl.Sum) }
		if me {
			third = nil
		}
	default:
		fmt.Printf("rankprog: unknown -case %q\n", kind)
		return 2
	}
	calls := []func() error{func() error { return allreduce(n, goccl.Sum) }, second, third}
	for i, f := range calls {
		if f == nil {
			continue
		}
		start := time.Now()
		if err := f(); err != nil {
			fmt.Printf("OUTCOME rank=%d call=%d ms=%d mismatch=%v peer=%v timeout=%v err=%q\n", r, i+1,
				time.Since(start).Milliseconds(), errors.Is(err, goccl.ErrMismatch), errors.Is(err, goccl.ErrPeer),
				errors.Is(err, goccl.ErrTimeout), err.Error())
			return 0
		}
	}
	if kind == "skiplast" && me {
		// Stay alive past the others' timeout, so they must time out rather than see us go.
		time.Sleep(2*comm.Config().Timeout + time.Second)
	}
	fmt.Printf("OUTCOME rank=%d call=0 ms=0 ok\n", r)
	return 0
}

// reportAuth prints whether Init and one checked AllReduce worked; it exits 0 so the
// launcher does not stop the other ranks before they report.
func reportAuth(ctx context.Context, rank int, comm *goccl.Comm, err error) int {
	if err == nil {
		defer comm.Close()
		xs := []float32{float32(rank + 1)}
		err = goccl.AllReduceSlice(ctx, comm, xs, goccl.Sum)
		w := comm.Size()
		if want := float32(w * (w + 1) / 2); err == nil && xs[0] != want {
			err = fmt.Errorf("allreduce gave %v, want %v", xs[0], want)
		}
	}
	if err != nil {
		fmt.Printf("AUTH rank=%d auth=%v err=%q\n", rank, errors.Is(err, goccl.ErrAuth), err.Error())
		return 0
	}
	fmt.Printf("AUTH rank=%d ok\n", rank)
	return 0
}

// runHold runs checked AllReduces until limit, for tests that disturb a live job.
func runHold(ctx context.Context, comm *goccl.Comm, limit time.Duration) int {
	r, w := comm.Rank(), comm.Size()
	end := time.Now().Add(limit)
	it := 0
	for ; ; it++ {
		// Rank 0's clock decides when to stop, so every rank runs the same iterations
		// (ranks that start at different times would otherwise disagree).
		more := []int32{0}
		if r == 0 && time.Now().Before(end) {
			more[0] = 1
		}
		if err := goccl.BroadcastSlice(ctx, comm, more, 0); err != nil {
			fmt.Printf("HOLD-ERROR rank=%d iter=%d err=%q\n", r, it, err.Error())
			return 1
		}
		if more[0] == 0 {
			break
		}
		n := faultSizes[it%len(faultSizes)]
		xs := make([]int32, n)
		for i := range xs {
			xs[i] = int32(r*n + i + it)
		}
		if err := goccl.AllReduceSlice(ctx, comm, xs, goccl.Sum); err != nil {
			fmt.Printf("HOLD-ERROR rank=%d iter=%d err=%q\n", r, it, err.Error())
			return 1
		}
		for i, x := range xs {
			// sum over ranks q of q*n + i + it
			if want := int32(n*w*(w-1)/2 + w*(i+it)); x != want {
				fmt.Printf("HOLD-WRONG rank=%d iter=%d element %d: got %d want %d\n", r, it, i, x, want)
				return 1
			}
		}
	}
	fmt.Printf("HOLD-OK rank=%d iters=%d\n", r, it)
	return 0
}
