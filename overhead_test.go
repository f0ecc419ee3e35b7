package goccl_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/transport"
)

// echoTransport's links hand every message straight back to the sender: a Recv returns
// the last payload sent on the link, relabelled with the header the receiver expects. A
// rank whose links all echo can run a collective alone, with no peer to wait for, so a
// benchmark over it measures only goccl's own per-call work (the communicator, the
// selector, the algorithm), never the machine's wake-ups.
type echoTransport struct{}

func (echoTransport) Name() string { return "echo-bench" }

func (echoTransport) Open(_ context.Context, l transport.Local) (transport.Endpoint, error) {
	return echoEndpoint{}, nil
}

type echoEndpoint struct{}

func (echoEndpoint) Handle() []byte                      { return []byte("echo") }
func (echoEndpoint) CanConnect(transport.PeerInfo) error { return nil }
func (echoEndpoint) Close() error                        { return nil }
func (echoEndpoint) Connect(_ context.Context, p transport.PeerInfo) (transport.Conn, error) {
	return &echoConn{peer: p.Rank}, nil
}

type echoConn struct {
	peer int
	last []byte
}

func (e *echoConn) Peer() int    { return e.peer }
func (e *echoConn) Close() error { return nil }
func (e *echoConn) Send(_ context.Context, _ transport.Header, p []byte) error {
	e.last = append(e.last[:0], p...)
	return nil
}

func (e *echoConn) Recv(_ context.Context, _ transport.Header, buf []byte) error {
	if len(buf) != len(e.last) {
		return fmt.Errorf("echo: %w: recv %d bytes, last sent %d", transport.ErrProtocol, len(buf), len(e.last))
	}
	copy(buf, e.last)
	return nil
}

// echoTryTransport is echoTransport with links that also take TrySend
// (transport.TrySender), so a two-rank AllReduce of up to 1 KiB takes the fast path
// (fastpath.go) and its benchmark measures that path's own work.
type echoTryTransport struct{ echoTransport }

func (echoTryTransport) Name() string { return "echo-try-bench" }

func (echoTryTransport) Open(_ context.Context, l transport.Local) (transport.Endpoint, error) {
	return echoTryEndpoint{}, nil
}

type echoTryEndpoint struct{ echoEndpoint }

func (echoTryEndpoint) Connect(_ context.Context, p transport.PeerInfo) (transport.Conn, error) {
	return &echoTryConn{echoConn{peer: p.Rank}}, nil
}

type echoTryConn struct{ echoConn }

func (e *echoTryConn) TrySend(h transport.Header, p []byte) (bool, error) {
	return true, e.Send(context.Background(), h, p)
}

func (e *echoTryConn) Flush() {}

func init() {
	transport.Register(echoTransport{})
	transport.Register(echoTryTransport{})
}

// echoComms is two ranks of this process over the echo transport name (one of the
// above), with the ring, closed when tb ends.
func echoComms(tb testing.TB, name string) []*goccl.Comm {
	tb.Helper()
	comms, err := goccl.InitLocal(context.Background(), 2, goccl.WithTransport(name), goccl.WithAlgo("ring"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// BenchmarkCallOverhead is the CPU cost of one small AllReduce/Broadcast to goccl itself
// (2 ranks, ring, one rank running against echoing links). Compare it with the 8-byte
// latency of `goccl perf`: the rest is the transport and the machine. It must report 0
// allocs/op for the blocking calls.
// Run: go test -run '^$' -bench CallOverhead -benchmem .
func BenchmarkCallOverhead(b *testing.B) {
	ctx := context.Background()
	comms := echoComms(b, "echo-bench")
	c := comms[0]
	xs := []float32{1, 2}
	buf := goccl.HostSlice(xs)
	b.Run("allreduce-8B", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			xs[0], xs[1] = 1, 2
			if err := c.AllReduce(ctx, buf, buf, 2, goccl.Float32, goccl.Sum); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("allreduce-8B-async", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := c.AllReduceAsync(ctx, buf, buf, 2, goccl.Float32, goccl.Sum).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("send-then-recv-8B", func(b *testing.B) { // two point-to-point calls
		b.ReportAllocs()
		for range b.N {
			if err := c.Send(ctx, buf, 2, goccl.Float32, 1); err != nil {
				b.Fatal(err)
			}
			if err := c.Recv(ctx, buf, 2, goccl.Float32, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.Run("allreduce-8B-cancellable-ctx", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := c.AllReduce(cctx, buf, buf, 2, goccl.Float32, goccl.Sum); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The two-rank fast path (fastpath.go), over links that take TrySend.
	fast := echoComms(b, "echo-try-bench")
	b.Run("allreduce-8B-fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			xs[0], xs[1] = 1, 2
			if err := fast[0].AllReduce(ctx, buf, buf, 2, goccl.Float32, goccl.Sum); err != nil {
				b.Fatal(err)
			}
		}
		if xs[0] != 2 || xs[1] != 4 {
			b.Fatalf("the fast path summed 1, 2 with itself to %v", xs)
		}
	})
	// Issued, then waited for: the Work runs on the fast path too (execute).
	b.Run("allreduce-8B-async-fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			xs[0], xs[1] = 1, 2
			if err := fast[0].AllReduceAsync(ctx, buf, buf, 2, goccl.Float32, goccl.Sum).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if xs[0] != 2 || xs[1] != 4 {
			b.Fatalf("the fast path summed 1, 2 with itself to %v", xs)
		}
	})
	// A halo batch (two sends to the echo, two receives back) and a two-rank
	// AllToAllV of one float32 each way, on the fast path (group.go).
	out, in, in2 := []float32{1, 2}, make([]float32, 2), make([]float32, 2)
	ops := []goccl.P2POp{
		goccl.SendOp(goccl.HostSlice(out), 2, goccl.Float32, 1),
		goccl.SendOp(goccl.HostSlice(out), 2, goccl.Float32, 1),
		goccl.RecvOp(goccl.HostSlice(in), 2, goccl.Float32, 1),
		goccl.RecvOp(goccl.HostSlice(in2), 2, goccl.Float32, 1),
	}
	b.Run("batch-4x8B-fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := fast[0].BatchSendRecv(ctx, ops); err != nil {
				b.Fatal(err)
			}
		}
		if in[1] != 2 || in2[1] != 2 {
			b.Fatalf("the echo sent back %v and %v, want [1 2] twice", in, in2)
		}
	})
	counts := []int{1, 1}
	b.Run("alltoallv-8B-fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := fast[0].AllToAllV(ctx, goccl.HostSlice(out), counts, goccl.HostSlice(in), counts, goccl.Float32); err != nil {
				b.Fatal(err)
			}
		}
		if in[0] != 1 || in[1] != 2 {
			b.Fatalf("AllToAllV through the echo received %v, want [1 2]", in)
		}
	})
}

// The README says a blocking small AllReduce allocates nothing; this holds it to that,
// over the echo links (so nothing a transport allocates counts). Values are checked too.
func TestBlockingCallAllocatesNothing(t *testing.T) {
	if raceEnabledExt {
		t.Skip("-race instruments allocations; the plain go test ./... runs this")
	}
	ctx := context.Background()
	comms := echoComms(t, "echo-bench")
	xs := []float32{1, 2}
	buf := goccl.HostSlice(xs)
	// noAllocs runs calls 200 times and fails unless they succeeded allocating nothing.
	noAllocs := func(what string, calls func() error) {
		t.Helper()
		var callErr error
		allocs := testing.AllocsPerRun(200, func() {
			if err := calls(); err != nil && callErr == nil {
				callErr = err
			}
		})
		if callErr != nil {
			t.Fatal(callErr)
		}
		if allocs != 0 {
			t.Fatalf("%s allocated %.1f times per run, want 0", what, allocs)
		}
	}
	noAllocs("a blocking 8-byte AllReduce", func() error {
		xs[0], xs[1] = 1, 2
		return comms[0].AllReduce(ctx, buf, buf, 2, goccl.Float32, goccl.Sum)
	})
	// Against an echo link the "peer" holds the same input: the sum is twice it.
	if xs[0] != 2 || xs[1] != 4 {
		t.Fatalf("got %v, want [2 4]", xs)
	}
	// Send and Recv alone, against the same echo: what goes out comes back.
	got := []float32{0, 0}
	noAllocs("a blocking Send and Recv", func() error {
		xs[0], xs[1] = 5, 6
		if err := comms[0].Send(ctx, buf, 2, goccl.Float32, 1); err != nil {
			return err
		}
		return comms[0].Recv(ctx, goccl.HostSlice(got), 2, goccl.Float32, 1)
	})
	if got[0] != 5 || got[1] != 6 {
		t.Fatalf("Recv got %v, want [5 6]", got)
	}
	// The same over links that take TrySend: the fast paths of both (fastpath.go).
	fast := echoComms(t, "echo-try-bench")
	noAllocs("a blocking 8-byte AllReduce on the fast path", func() error {
		xs[0], xs[1] = 1, 2
		return fast[0].AllReduce(ctx, buf, buf, 2, goccl.Float32, goccl.Sum)
	})
	if xs[0] != 2 || xs[1] != 4 {
		t.Fatalf("got %v, want [2 4]", xs)
	}
	noAllocs("a blocking Send and Recv on the fast path", func() error {
		xs[0], xs[1] = 7, 8
		if err := fast[0].Send(ctx, buf, 2, goccl.Float32, 1); err != nil {
			return err
		}
		return fast[0].Recv(ctx, goccl.HostSlice(got), 2, goccl.Float32, 1)
	})
	if got[0] != 7 || got[1] != 8 {
		t.Fatalf("Recv got %v, want [7 8]", got)
	}
	// AllGather and ReduceScatter on theirs (fastPair): the echo returns the block this
	// rank sent, so the gather holds its own block twice and the reduction adds the two
	// blocks of its input.
	noAllocs("a blocking AllGather and ReduceScatter on the fast path", func() error {
		xs[0], xs[1] = 3, 4
		if err := fast[0].AllGather(ctx, goccl.HostSlice(xs[:1]), goccl.HostSlice(got), 1, goccl.Float32); err != nil {
			return err
		}
		if got[0] != 3 || got[1] != 3 {
			return fmt.Errorf("AllGather got %v, want [3 3]", got)
		}
		if err := fast[0].ReduceScatter(ctx, buf, goccl.HostSlice(got[:1]), 1, goccl.Float32, goccl.Sum); err != nil {
			return err
		}
		if got[0] != 7 {
			return fmt.Errorf("ReduceScatter got %v, want 7", got[0])
		}
		return nil
	})
}

// A blocking BatchSendRecv of up to four ops and an AllToAllV of up to eight ranks
// allocate nothing on the fast path (group.go) once the communicator has run more calls
// than its flight recorder keeps: the copy of the ops or counts that the recorder names
// a call by (batchCall, allToAllV) is reused once the call has returned and its record
// is overwritten (reuse.go). Before, each allocated that copy every call; before
// session 40 a batch allocated three objects and an AllToAllV four. Over the echo links of TestBlockingCallAllocatesNothing, whose "peer" sends back what this
// rank sent.
func TestGroupCallsAllocateNothing(t *testing.T) {
	if raceEnabledExt {
		t.Skip("-race instruments allocations; the plain go test ./... runs this")
	}
	ctx := context.Background()
	fast := echoComms(t, "echo-try-bench")
	out, in, in2 := []float32{1, 2, 3}, make([]float32, 3), make([]float32, 2)
	// The echo keeps the last message: two sends of the same data, two receives.
	ops := []goccl.P2POp{
		goccl.SendOp(goccl.HostSlice(out[1:]), 2, goccl.Float32, 1),
		goccl.SendOp(goccl.HostSlice(out[1:]), 2, goccl.Float32, 1),
		goccl.RecvOp(goccl.HostSlice(in[1:]), 2, goccl.Float32, 1),
		goccl.RecvOp(goccl.HostSlice(in2), 2, goccl.Float32, 1),
	}
	counts := []int{1, 2}
	for _, call := range []struct {
		what string
		run  func() error
		want []float32
	}{
		{"a batch of four ops", func() error { return fast[0].BatchSendRecv(ctx, ops) }, []float32{0, 2, 3}},
		// Block 1 (two elements) goes to the echo and comes back; block 0 is this
		// rank's own.
		{"an AllToAllV", func() error {
			return fast[0].AllToAllV(ctx, goccl.HostSlice(out), counts, goccl.HostSlice(in), counts, goccl.Float32)
		}, []float32{1, 2, 3}},
	} {
		clear(in)
		var callErr error
		// Past the flight recorder's 64 records, so the descriptions come back.
		for range 100 {
			if err := call.run(); err != nil {
				t.Fatalf("%s: %v", call.what, err)
			}
		}
		allocs := testing.AllocsPerRun(200, func() {
			if err := call.run(); err != nil && callErr == nil {
				callErr = err
			}
		})
		if callErr != nil {
			t.Fatalf("%s: %v", call.what, callErr)
		}
		if fmt.Sprint(in) != fmt.Sprint(call.want) {
			t.Fatalf("%s: received %v, want %v", call.what, in, call.want)
		}
		if allocs != 0 {
			t.Fatalf("%s allocated %.2f times per call, want 0", call.what, allocs)
		}
	}
	if in2[0] != 2 || in2[1] != 3 {
		t.Fatalf("the batch's second receive got %v, want [2 3]", in2)
	}
	if s := fast[0].Stats().ByAlgo["p2p"]; s.Calls < 2*301 {
		t.Fatalf("Stats counted %d p2p calls, want at least %d", s.Calls, 2*301)
	}
}

// The ring's and the double tree's steps at more than two ranks were built per call: the
// ring's by append, 2.6 KiB in 9 pieces per call and rank, the tree's serial plan 1.3 KiB
// in 18, which a process with a large heap (rare collections) paid for in page faults
// (BENCHMARKS.md, "Speed", 28e). Over 4 ranks of this process on shm, out of place, at
// sizes on their serial paths (and the ring's up to 256 KiB), a call now allocates less
// than one piece per rank on average (the rest of the call, the communicator and the
// links, allocates nothing in the steady state). Values are checked: every rank's input
// is rank+1 everywhere, so every output element is 10. (Before the change: 8.0 for the
// ring, 18 for the tree.)
func TestSerialStepsAllocateLittle(t *testing.T) {
	if raceEnabledExt {
		t.Skip("-race instruments allocations; the plain go test ./... runs this")
	}
	for _, tc := range []struct {
		algo  string
		sizes []int
	}{{"ring", []int{1, 7, 1001, 64 << 10}}, {"tree", []int{1, 7, 1001, 16 << 10}}} {
		t.Run(tc.algo, func(t *testing.T) { testAllocatesLittle(t, tc.algo, tc.sizes) })
	}
}

func testAllocatesLittle(t *testing.T, algo string, sizes []int) {
	ctx := context.Background()
	// A wait long enough to sleep on the futex allocates (its context's wake-up); spinning
	// for up to a second keeps every wait here off that path.
	comms, err := goccl.InitLocal(ctx, 4, goccl.WithTransport("shm"), goccl.WithAlgo(algo), goccl.WithParam("shm.spin", "1s"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	for _, n := range sizes {
		send, recv := make([]goccl.Buffer, 4), make([][]float32, 4)
		for r := range comms {
			in := make([]float32, n)
			for i := range in {
				in[i] = float32(r + 1)
			}
			send[r], recv[r] = goccl.HostSlice(in), make([]float32, n)
		}
		run := func(calls int) error {
			errs := make(chan error, len(comms))
			for r, c := range comms {
				go func() {
					out := goccl.HostSlice(recv[r])
					for range calls {
						if err := c.AllReduce(ctx, send[r], out, n, goccl.Float32, goccl.Sum); err != nil {
							errs <- fmt.Errorf("rank %d: %w", r, err)
							return
						}
					}
					errs <- nil
				}()
			}
			var first error
			for range comms {
				if err := <-errs; err != nil && first == nil {
					first = err
				}
			}
			return first
		}
		if err := run(20); err != nil { // warm: the links' first messages, the pools
			t.Fatal(err)
		}
		const calls = 200
		var callErr error
		allocs := testing.AllocsPerRun(1, func() { callErr = run(calls) })
		if callErr != nil {
			t.Fatal(callErr)
		}
		for r := range recv {
			for i, v := range recv[r] {
				if v != 10 {
					t.Fatalf("%d floats: rank %d element %d = %v, want 10", n, r, i, v)
				}
			}
		}
		// run itself allocates a channel and a goroutine per rank once per run.
		if per := allocs / (calls * float64(len(comms))); per >= 1 {
			t.Fatalf("%d floats: %s allocated %.2f times per call and rank, want < 1", n, algo, per)
		}
	}
}
