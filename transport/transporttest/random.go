package transporttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/seeds"
	"github.com/goccl/goccl/transport"
)

// randomMessages is how many messages testRandom sends each way (a quarter of them
// under the race detector).
const randomMessages = 400

// randomMsg is one message of testRandom: its size and tag, and how it is sent and
// received.
type randomMsg struct {
	n    int
	tag  uint32
	send int // 0 Send, 1 TrySend (Send when it is refused), 2 Reserve and Commit
	recv int // 0 Recv, 1 RecvStream, 2 RecvCold
	adv  int // Reserve: where Advance is called (-1: not at all)
}

// randomPlan draws count messages of sizes from 0 to max: empty, what goes with a
// record (a few dozen bytes), a few KiB, around a ring's quarter, and up to maxN, each
// sent and received by whichever of the link's ways it offers.
func randomPlan(rng *rand.Rand, count, maxN, reserveMax int, try, stream, cold bool) []randomMsg {
	msgs := make([]randomMsg, count)
	for i := range msgs {
		m := &msgs[i]
		switch r := rng.IntN(10); {
		case r == 0:
			m.n = 0
		case r < 4:
			m.n = 1 + rng.IntN(80)
		case r < 6:
			m.n = 81 + rng.IntN(4<<10)
		case r < 8 && reserveMax > 0:
			m.n = max(0, reserveMax-8+rng.IntN(16))
		default:
			m.n = rng.IntN(1<<20 + 7)
		}
		m.n = min(m.n, maxN)
		m.tag = rng.Uint32()
		m.send = rng.IntN(3)
		if m.send == 1 && !try || m.send == 2 && (reserveMax <= 0 || m.n > reserveMax) {
			m.send = 0
		}
		m.recv = rng.IntN(3)
		if m.recv == 1 && !stream || m.recv == 2 && !cold {
			m.recv = 0
		}
		m.adv = -1
		if m.send == 2 && m.n > 0 && rng.IntN(2) == 0 {
			m.adv = rng.IntN(m.n + 1)
		}
	}
	return msgs
}

// testRandom: both directions of a link at once, each a random sequence of messages of
// random sizes, sent with Send, TrySend or Reserve (where the link offers them) and
// received with Recv, RecvStream or RecvCold, arrive whole, in order, byte for byte.
// Where the fixed checks each take one way at a time, here the ways follow each other
// at random places in a ring, and both directions run together.
//
// GOCCL_RANDOM_SEEDS=n sends n plans each way, one after the other, from the seed
// GOCCL_RANDOM_SEED (default 0), as every randomized test reads them (internal/seeds).
func testRandom(t *testing.T, tr transport.Transport, opt Options) {
	conns := Mesh(t, tr, 2, opt)
	for _, seed := range seeds.List(t, 1, 0) {
		randomRound(t, conns, seed, opt)
	}
}

// randomRound sends one random plan each way at once over conns, under seed.
func randomRound(t *testing.T, conns [][]transport.Conn, seed uint64, opt Options) {
	ctx := opt.ctx(t)
	var g group
	for from := range 2 {
		out, in := conns[from][1-from], conns[1-from][from]
		try, _ := out.(transport.TrySender)
		res, _ := out.(transport.Reserver)
		st, _ := in.(transport.Streamer)
		if opt.SkipStreamer {
			st = nil
		}
		cold, _ := in.(transport.ColdReceiver)
		reserveMax := 0
		if res != nil {
			reserveMax = res.ReserveMax()
		}
		rng := rand.New(rand.NewPCG(seed, uint64(from)<<32|0x7a11))
		count := randomMessages
		if raceEnabled {
			count /= 4
		}
		msgs := randomPlan(rng, count, min(opt.MaxMessage, 1<<20+7), min(reserveMax, opt.MaxMessage), try != nil,
			st != nil, cold != nil)
		g.Go(func() error {
			for i, m := range msgs {
				h, p := Header(uint64(i), m.n, m.tag), Pattern(m.n, uint64(i)<<8|uint64(from))
				if err := randomSend(ctx, out, try, res, m, h, p); err != nil {
					return fmt.Errorf("seed %d: rank %d: message %d of %d bytes (send way %d): %w", seed, from, i, m.n, m.send, err)
				}
			}
			return nil
		})
		g.Go(func() error {
			for i, m := range msgs {
				h, want := Header(uint64(i), m.n, m.tag), Pattern(m.n, uint64(i)<<8|uint64(from))
				got, err := randomRecv(ctx, in, st, cold, m, h)
				if err != nil {
					return fmt.Errorf("seed %d: rank %d: message %d of %d bytes from rank %d (receive way %d): %w", seed, 1-from, i, m.n, from, m.recv, err)
				}
				if d := Diff(got, want); d != "" {
					return fmt.Errorf("seed %d: rank %d: message %d of %d bytes from rank %d (send way %d, receive way %d): %s",
						seed, 1-from, i, m.n, from, m.send, m.recv, d)
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

func randomSend(ctx context.Context, out transport.Conn, try transport.TrySender, res transport.Reserver, m randomMsg, h transport.Header, p []byte) error {
	switch m.send {
	case 1:
		sent, err := try.TrySend(h, p)
		if err != nil {
			return err
		}
		if sent {
			try.Flush()
			return nil
		}
	case 2:
		first, second, err := res.Reserve(ctx, h, m.n)
		if err != nil {
			return err
		}
		if len(first)+len(second) != m.n {
			res.Abort()
			return fmt.Errorf("Reserve(%d) gave %d+%d bytes", m.n, len(first), len(second))
		}
		copy(first, p)
		copy(second, p[len(first):])
		if m.adv >= 0 {
			res.Advance(m.adv)
		}
		return res.Commit(ctx)
	}
	return out.Send(ctx, h, p)
}

func randomRecv(ctx context.Context, in transport.Conn, st transport.Streamer, cold transport.ColdReceiver, m randomMsg, h transport.Header) ([]byte, error) {
	got := make([]byte, m.n)
	switch m.recv {
	case 1:
		seen := make([]bool, m.n)
		err := st.RecvStream(ctx, h, m.n, func(off int, piece []byte) error {
			if off < 0 || off+len(piece) > m.n {
				return fmt.Errorf("a piece [%d, %d) outside the message's %d bytes", off, off+len(piece), m.n)
			}
			for j := range piece {
				if seen[off+j] {
					return fmt.Errorf("byte %d arrived twice", off+j)
				}
				seen[off+j] = true
			}
			copy(got[off:], piece)
			return nil
		})
		if err != nil {
			return nil, err
		}
		for j, ok := range seen {
			if !ok {
				return nil, fmt.Errorf("byte %d never arrived", j)
			}
		}
		return got, nil
	case 2:
		return got, cold.RecvCold(ctx, h, got)
	}
	return got, in.Recv(ctx, h, got)
}
