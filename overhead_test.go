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

func init() { transport.Register(echoTransport{}) }

// BenchmarkCallOverhead is the CPU cost of one small AllReduce/Broadcast to goccl itself
// (2 ranks, ring, one rank running against echoing links). Compare it with the 8-byte
// latency of `goccl perf`: the rest is the transport and the machine. It must report 0
// allocs/op for the blocking calls.
// Run: go test -run '^$' -bench CallOverhead -benchmem .
func BenchmarkCallOverhead(b *testing.B) {
	ctx := context.Background()
	comms, err := goccl.InitLocal(ctx, 2, goccl.WithTransport("echo-bench"), goccl.WithAlgo("ring"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
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
}

// The README says a blocking small AllReduce allocates nothing; this holds it to that,
// over the echo links (so nothing a transport allocates counts). Values are checked too.
func TestBlockingCallAllocatesNothing(t *testing.T) {
	if raceEnabledExt {
		t.Skip("-race instruments allocations; the plain go test ./... runs this")
	}
	ctx := context.Background()
	comms, err := goccl.InitLocal(ctx, 2, goccl.WithTransport("echo-bench"), goccl.WithAlgo("ring"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	xs := []float32{1, 2}
	buf := goccl.HostSlice(xs)
	var callErr error
	allocs := testing.AllocsPerRun(200, func() {
		xs[0], xs[1] = 1, 2
		if err := comms[0].AllReduce(ctx, buf, buf, 2, goccl.Float32, goccl.Sum); err != nil && callErr == nil {
			callErr = err
		}
	})
	if callErr != nil {
		t.Fatal(callErr)
	}
	// Against an echo link the "peer" holds the same input: the sum is twice it.
	if xs[0] != 2 || xs[1] != 4 {
		t.Fatalf("got %v, want [2 4]", xs)
	}
	if allocs != 0 {
		t.Fatalf("a blocking 8-byte AllReduce allocated %.1f times per call, want 0", allocs)
	}
}
