package tcp

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// TestParts checks the cut of a payload into parts against its definition: contiguous,
// covering [0, n), every inner cut a multiple of partAlign within partAlign of n*i/k.
func TestParts(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 4095, 4096, 4097, 1<<20 + 3, 64 << 20} {
		for _, k := range []int{1, 2, 3, 4, 7, MaxSockets} {
			end := 0
			for i := range k {
				lo, hi := part(n, k, i)
				require.Equal(t, end, lo, "n=%d k=%d part %d starts where %d ended", n, k, i, i-1)
				require.LessOrEqual(t, lo, hi, "n=%d k=%d part %d", n, k, i)
				if i+1 < k {
					exact := n * (i + 1) / k
					require.Zero(t, hi%partAlign, "n=%d k=%d cut %d", n, k, i+1)
					require.True(t, hi <= exact && exact-hi < partAlign, "n=%d k=%d cut %d at %d, exact %d", n, k, i+1, hi, exact)
				}
				end = hi
			}
			require.Equal(t, n, end, "n=%d k=%d", n, k)
		}
	}
}

// socketPairs returns k connected loopback TCP pairs.
func socketPairs(t *testing.T, k int) (a, b []net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	for range k {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		s, err := ln.Accept()
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
		a, b = append(a, c), append(b, s)
	}
	return a, b
}

// TestTrickle feeds a striped message to a receiver in odd-sized bursts with pauses,
// so that it runs dry in the middle of parts again and again: the path where it hands
// fn what it has before parking. Pieces must still be cut on 64-byte boundaries, cover
// the message once, and Recv must reassemble the same bytes.
func TestTrickle(t *testing.T) {
	const k, n, stripe = 2, 300<<10 + 13, 4096
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			w, r := socketPairs(t, k)
			c, err := newConn(1, transport.PeerInfo{Rank: 0, Host: "localhost"}, r, stripe, 50*time.Microsecond)
			require.NoError(t, err)
			h := transporttest.Header(0, n, 0)
			want := transporttest.Pattern(n, 42)
			go func() {
				hdr := make([]byte, transport.FrameHeaderSize)
				f := transport.Frame{Header: h, Len: n}
				f.Encode(hdr)
				_, _ = w[0].Write(hdr)
				var at [k]int
				for i := range k {
					at[i], _ = part(n, k, i)
				}
				for burst := 0; ; burst++ {
					moved := false
					for i := range k {
						_, hi := part(n, k, i)
						m := min(997, hi-at[i])
						if m == 0 {
							continue
						}
						if _, err := w[i].Write(want[at[i] : at[i]+m]); err != nil {
							return
						}
						at[i] += m
						moved = true
					}
					if !moved {
						return
					}
					if burst%4 == 0 {
						time.Sleep(100 * time.Microsecond)
					}
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got := make([]byte, n)
			if !stream {
				require.NoError(t, c.Recv(ctx, h, got))
				require.Empty(t, transporttest.Diff(got, want))
				return
			}
			seen, pieces := make([]bool, n), 0
			require.NoError(t, c.RecvStream(ctx, h, n, func(off int, p []byte) error {
				end := off + len(p)
				if off%partAlign != 0 || end%partAlign != 0 && end != n {
					return fmt.Errorf("piece [%d, %d) is not cut on %d-byte boundaries", off, end, partAlign)
				}
				for j := off; j < end; j++ {
					if seen[j] {
						return fmt.Errorf("byte %d delivered twice", j)
					}
					seen[j] = true
				}
				copy(got[off:], p)
				pieces++
				return nil
			}))
			require.Empty(t, transporttest.Diff(got, want))
			// A trickle must have been delivered in many pieces, or this test did not
			// reach the path it is for.
			require.Greater(t, pieces, n/streamPiece+k)
		})
	}
}
