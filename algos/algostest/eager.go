package algostest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// The eager contract (transport.EagerFloor, algos.EagerLimit): a link takes a message
// of up to the eager size without a running receive, and nothing more. An algorithm
// may send such a message and only then receive; a larger one it must send while its
// receives run, or two ranks that each wait for their own send wait for each other.
// The in-memory links of a Mesh queue any message whole, so they never show such a
// wait: Strict makes them.

// Strict makes m's links keep the eager contract to the letter: a Send of more than
// algos.EagerBytes bytes returns only once the peer has received that message.
func (m *Mesh) Strict() {
	dirs := make(map[[2]int]*strictDir)
	for r := range m.World {
		for p := range m.World {
			if p != r {
				dirs[[2]int{r, p}] = new(strictDir)
			}
		}
	}
	m.Wrap(func(rank, peer int, c transport.Conn) transport.Conn {
		return &strictConn{Conn: c, out: dirs[[2]int{rank, peer}], in: dirs[[2]int{peer, rank}]}
	})
}

// strictDir is one direction of a link: messages sent, and received by the peer.
type strictDir struct {
	sent atomic.Int64
	got  algos.Progress
}

// strictConn is a Mesh link under Strict. It has none of the optional abilities
// (Streamer, Reserver, ...), so algorithms take their plain paths over it.
type strictConn struct {
	transport.Conn
	out, in *strictDir
}

func (c *strictConn) Send(ctx context.Context, h transport.Header, payload []byte) error {
	if err := c.Conn.Send(ctx, h, payload); err != nil {
		return err
	}
	k := c.out.sent.Add(1)
	if len(payload) <= algos.EagerBytes {
		return nil
	}
	if err := c.out.got.Wait(ctx, int(k)); err != nil {
		return fmt.Errorf("algostest: a send of more than the eager size (%d bytes) waited for its receiver: %w",
			algos.EagerBytes, err)
	}
	return nil
}

func (c *strictConn) Recv(ctx context.Context, want transport.Header, buf []byte) error {
	if err := c.Conn.Recv(ctx, want, buf); err != nil {
		return err
	}
	c.in.got.Advance()
	return nil
}

// CheckEager runs every kind run implements over links that keep the eager contract to
// the letter (Mesh.Strict): messages of more than algos.EagerBytes, in chunks past it
// too, at 2 to 5 ranks (2 to 4 under the race detector), in place and out of place. An algorithm that sends such a
// message and waits for it to go before it receives hangs there, and the call fails
// at its timeout instead of returning.
func CheckEager(t *testing.T, name string, run RunFunc, supports func(transport.Kind) bool) {
	worlds, counts, chunks := []int{2, 3, 4, 5}, []int{3*algos.EagerBytes/4 + 5, 40001}, []int{0, 4 * algos.EagerBytes, 1 << 20}
	if raceEnabled { // the paths, not the sizes: a quarter of the calls
		worlds, counts, chunks = worlds[:3], counts[1:], []int{0, 1 << 20}
	}
	for _, w := range worlds {
		t.Run(fmt.Sprintf("%s/world%d", name, w), func(t *testing.T) {
			seed := uint64(0)
			for _, k := range transport.Kinds {
				if !supports(k) || k == transport.KindBarrier {
					continue
				}
				for _, count := range counts {
					for _, chunk := range chunks {
						for _, inPlace := range []bool{false, true} {
							seed++
							c := Case{Kind: k, DType: transport.Float32, Op: transport.Sum, Count: count, Root: int(seed) % w,
								InPlace: inPlace, ChunkBytes: chunk, Seed: seed}
							if k == transport.KindSendRecv {
								c.Root = 1 + int(seed)%(w-1)
							}
							// A fresh mesh per call: a call that hung leaves its links in
							// no state for the next.
							m, err := NewMesh(context.Background(), w)
							if err != nil {
								t.Fatal(err)
							}
							m.Strict()
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
							err = c.Check(ctx, m, run)
							cancel()
							m.Close()
							if err != nil {
								t.Fatalf("%s: world %d: %v: %v", name, w, c, err)
							}
						}
					}
				}
			}
		})
	}
}
