package tcp_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/goccl/goccl/tcp"
	"github.com/goccl/goccl/transport/transporttest"
)

// BenchmarkOneWay measures one-way bandwidth over loopback: rank 0 sends, rank 1
// receives into one reused buffer.
//
//	go test -run '^$' -bench OneWay -benchtime 20x ./tcp/
func BenchmarkOneWay(b *testing.B) {
	for _, n := range []int{4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			conns := transporttest.Mesh(b, tcp.Transport{}, 2, transporttest.Options{Params: loopback})
			ctx := context.Background()
			src, dst := transporttest.Pattern(n, 1), make([]byte, n)
			h := transporttest.Header(0, n, 0)
			errc := make(chan error, 1)
			b.SetBytes(int64(n))
			b.ResetTimer()
			go func() {
				for range b.N {
					if err := conns[0][1].Send(ctx, h, src); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			for range b.N {
				if err := conns[1][0].Recv(ctx, h, dst); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRoundTrip8B measures the latency of an 8-byte ping-pong (ns/op is one
// round trip; half of it is the one-way latency an 8-byte allreduce step pays).
func BenchmarkRoundTrip8B(b *testing.B) {
	conns := transporttest.Mesh(b, tcp.Transport{}, 2, transporttest.Options{Params: loopback})
	ctx := context.Background()
	h := transporttest.Header(0, 8, 0)
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, 8)
		for range b.N {
			if err := conns[1][0].Recv(ctx, h, buf); err != nil {
				errc <- err
				return
			}
			if err := conns[1][0].Send(ctx, h, buf); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	buf := make([]byte, 8)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := conns[0][1].Send(ctx, h, buf); err != nil {
			b.Fatal(err)
		}
		if err := conns[0][1].Recv(ctx, h, buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}
