//go:build linux

package shm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// Benchmarks: one-way bandwidth through the ring and through single-copy, and the
// 8-byte ping-pong latency (ns/op is one round trip; half of it is the one-way time).
// "InProc" runs both ranks as goroutines over two mappings of one segment; "Proc" runs
// the receiver as a separate process, as ranks launched by goccl run would be.

var benchSizes = []int{4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}

var benchModes = []struct {
	name   string
	params transport.Params
}{
	{"ring", transport.Params{"shm.single_copy": "false"}},
	{"singlecopy", transport.Params{"shm.single_copy": "true", "shm.single_copy_min": "1"}},
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dM", n>>20)
	}
	return fmt.Sprintf("%dK", n>>10)
}

func BenchmarkOneWayInProc(b *testing.B) {
	for _, m := range benchModes {
		for _, n := range benchSizes {
			b.Run(m.name+"/"+sizeName(n), func(b *testing.B) {
				a, r := benchPair(b, m.params)
				ctx := context.Background()
				src, dst := transporttest.Pattern(n, 1), make([]byte, n)
				b.SetBytes(int64(n))
				b.ResetTimer()
				var wg sync.WaitGroup
				var sendErr error
				wg.Go(func() {
					for i := 0; i < b.N; i++ {
						if err := a.Send(ctx, transporttest.Header(uint64(i), n, 0), src); err != nil {
							sendErr = err
							return
						}
					}
				})
				for i := 0; i < b.N; i++ {
					if err := r.Recv(ctx, transporttest.Header(uint64(i), n, 0), dst); err != nil {
						b.Fatal(err)
					}
				}
				wg.Wait()
				require.NoError(b, sendErr)
			})
		}
	}
}

func BenchmarkOneWayProc(b *testing.B) {
	for _, m := range benchModes {
		for _, n := range benchSizes {
			b.Run(m.name+"/"+sizeName(n), func(b *testing.B) {
				ctx, c, cmd := procPeer(b, "sink", m.params, n)
				src := transporttest.Pattern(n, 1)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := c.Send(ctx, transporttest.Header(uint64(i), n, 0), src); err != nil {
						b.Fatal(err)
					}
				}
				require.NoError(b, c.Recv(ctx, transporttest.Header(0, 1, 1), make([]byte, 1)))
				b.StopTimer()
				require.NoError(b, cmd.Wait())
			})
		}
	}
}

// procPeer starts a child rank with role for b.N messages of n bytes and links to it;
// the link is closed by b.Cleanup.
func procPeer(b *testing.B, role string, params transport.Params, n int) (context.Context, *conn, *exec.Cmd) {
	me, cmd := spawn(b, role, 1, benchParams(params), fmt.Sprintf("GOCCL_SHM_SIZE=%d", n), fmt.Sprintf("GOCCL_SHM_COUNT=%d", b.N))
	ctx := benchCtx(b)
	c, err := me.link(ctx)
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	b.SetBytes(int64(n))
	return ctx, c, cmd
}

// BenchmarkExchangeProc: both processes send and receive n bytes at once; MB/s counts
// one direction.
func BenchmarkExchangeProc(b *testing.B) {
	for _, m := range benchModes {
		for _, n := range benchSizes[2:] {
			b.Run(m.name+"/"+sizeName(n), func(b *testing.B) {
				ctx, c, cmd := procPeer(b, "exchange", m.params, n)
				b.ResetTimer()
				require.NoError(b, exchange(ctx, c, n, b.N))
				b.StopTimer()
				require.NoError(b, cmd.Wait())
			})
		}
	}
}

func BenchmarkPingPong8BInProc(b *testing.B) {
	a, r := benchPair(b, nil)
	ctx := context.Background()
	buf, echo := make([]byte, 8), make([]byte, 8)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < b.N; i++ {
			h := transporttest.Header(uint64(i), 8, 0)
			if r.Recv(ctx, h, echo) != nil || r.Send(ctx, h, echo) != nil {
				return
			}
		}
	})
	b.ResetTimer()
	pingPong(ctx, b, a, buf)
	wg.Wait()
}

func BenchmarkPingPong8BProc(b *testing.B) {
	ctx, c, cmd := procPeer(b, "echo", nil, 8)
	b.SetBytes(0)
	b.ResetTimer()
	pingPong(ctx, b, c, make([]byte, 8))
	b.StopTimer()
	require.NoError(b, cmd.Wait())
}

// BenchmarkSwap8BProc: both processes send 8 bytes and then receive the other's, in
// step (ns/op is one exchange: what a two-rank 8-byte AllReduce costs its link).
func BenchmarkSwap8BProc(b *testing.B) {
	ctx, c, cmd := procPeer(b, "swap", nil, 8)
	b.SetBytes(0)
	b.ResetTimer()
	if err := swap(ctx, c, make([]byte, 8), b.N); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	require.NoError(b, cmd.Wait())
}

// pingPong sends buf and waits for it to come back, b.N times.
func pingPong(ctx context.Context, b *testing.B, c *conn, buf []byte) {
	for i := 0; i < b.N; i++ {
		h := transporttest.Header(uint64(i), len(buf), 0)
		// Not require.NoError: its t.Helper walks the stack, which was most of the
		// measured round trip.
		if err := c.Send(ctx, h, buf); err != nil {
			b.Fatal(err)
		}
		if err := c.Recv(ctx, h, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// benchParams adds the settings in $SHM_BENCH_PARAMS ("shm.spin=1ms,shm.ring_bytes=1M")
// to params, for trying settings without editing the benchmarks.
func benchParams(params transport.Params) transport.Params {
	out := transport.Params{}
	for k, v := range params {
		out[k] = v
	}
	for k, v := range parseParams(os.Getenv("SHM_BENCH_PARAMS")) {
		out[k] = v
	}
	return out
}

func benchPair(b *testing.B, params transport.Params) (*conn, *conn) {
	comm := transporttest.CommID("bench")
	eps, infos := openN(b, comm, 2, benchParams(params))
	conns, err := transporttest.Connect(context.Background(), eps, infos, 10*time.Second)
	require.NoError(b, err)
	b.Cleanup(func() { _ = conns[0][1].Close(); _ = conns[1][0].Close() })
	return conns[0][1].(*conn), conns[1][0].(*conn)
}

// benchCtx bounds a benchmark run generously: it detects hangs, not slowness.
func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	return ctx
}
