package transporttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/goccl/goccl/transport"
)

// Pattern returns n bytes that depend on every position and on seed, so a message that
// is truncated, shifted, reordered or delivered to the wrong peer does not compare equal.
func Pattern(n int, seed uint64) []byte {
	b := make([]byte, n)
	FillPattern(b, seed)
	return b
}

// FillPattern fills b as Pattern does.
func FillPattern(b []byte, seed uint64) {
	x := seed*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	i := 0
	for ; i+8 <= len(b); i += 8 {
		// xorshift64*: cheap, and no 8-byte word repeats within any size we send.
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		binary.LittleEndian.PutUint64(b[i:], x*0x2545f4914f6cdd1d)
	}
	for ; i < len(b); i++ {
		b[i] = byte(x>>(8*(i%8))) ^ byte(i)
	}
}

// Diff describes the first difference between got and want, or returns "" when equal.
func Diff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			n := 0
			for j := i; j < len(got); j++ {
				if got[j] != want[j] {
					n++
				}
			}
			return fmt.Sprintf("first difference at byte %d of %d (got %#02x, want %#02x); %d bytes differ",
				i, len(got), got[i], want[i], n)
		}
	}
	return "differs"
}

// Header returns the header the suite stamps on message seq of n bytes.
func Header(seq uint64, n int, tag uint32) transport.Header {
	return transport.Header{
		Seq: seq,
		Fp:  transport.Fingerprint{Kind: transport.KindSendRecv, DType: transport.Uint8, Count: uint64(n), Root: -1},
		Tag: tag,
	}
}

// group runs functions concurrently and keeps the first error (the suite cannot call
// require from goroutines other than the test's own).
type group struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	first error
}

func (g *group) Go(f func() error) {
	g.wg.Go(func() {
		if err := f(); err != nil {
			g.mu.Lock()
			if g.first == nil {
				g.first = err
			}
			g.mu.Unlock()
		}
	})
}

func (g *group) Wait() error {
	g.wg.Wait()
	return g.first
}

// SendRecv sends payload from a to b (a's Conn to b, b's Conn to a) with header h and
// checks that it arrives intact.
func SendRecv(ctx context.Context, from, to transport.Conn, h transport.Header, payload []byte) error {
	var g group
	g.Go(func() error {
		if err := from.Send(ctx, h, payload); err != nil {
			return fmt.Errorf("send %s (%d bytes) to rank %d: %w", h, len(payload), from.Peer(), err)
		}
		return nil
	})
	got := make([]byte, len(payload))
	g.Go(func() error {
		if err := to.Recv(ctx, h, got); err != nil {
			return fmt.Errorf("recv %s (%d bytes) from rank %d: %w", h, len(payload), to.Peer(), err)
		}
		if d := Diff(got, payload); d != "" {
			return fmt.Errorf("recv %s from rank %d: content: %s", h, to.Peer(), d)
		}
		return nil
	})
	return g.Wait()
}
