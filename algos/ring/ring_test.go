package ring_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/algos/ring"
	"github.com/goccl/goccl/transport"
)

func TestMatrix(t *testing.T) {
	algostest.Matrix(t, ring.Algorithm{}, algostest.Options{Large: true})
}

// TestExchange: two ranks' small AllReduce run by algos.Exchange (the communicator's
// path) on one rank and by the ring on the other.
func TestExchange(t *testing.T) {
	algostest.ExchangeMatrix(t, ring.Algorithm{}, []int{2})
}

// TestExchangeBoundary: two ranks exchange an AllReduce's input whole only while it is
// one message each way (the eager size and one chunk) and at most
// algos.RingExchangeMax; never at more ranks.
func TestExchangeBoundary(t *testing.T) {
	const eager, chunk = 1 << 20, 2 << 20
	for _, tc := range []struct {
		n, w, chunk, eager int
		want               bool
	}{
		{0, 2, chunk, eager, true}, {8, 2, chunk, eager, true},
		{algos.RingExchangeMax, 2, chunk, eager, true}, {algos.RingExchangeMax + 1, 2, chunk, eager, false},
		{256 << 10, 2, chunk, eager, true}, {eager, 2, chunk, eager, false},
		{8, 3, chunk, eager, false}, {8, 4, chunk, eager, false},
		{16 << 10, 2, chunk, 16 << 10, true}, {16<<10 + 1, 2, chunk, 16 << 10, false}, // the eager size
		{64 << 10, 2, 64 << 10, eager, true}, {64<<10 + 1, 2, 64 << 10, eager, false}, // one chunk (shm's)
	} {
		_, ok := ring.Algorithm{}.ExchangeTag(tc.n, tc.w, tc.chunk, tc.eager)
		require.Equal(t, tc.want, ok, "n=%d w=%d chunk=%d eager=%d", tc.n, tc.w, tc.chunk, tc.eager)
	}
}

func TestFailures(t *testing.T) {
	a := ring.Algorithm{}
	algostest.CheckFailures(t, a.Name(), a.Run, a.Supports)
}

// TestErrorSaysWhere checks a link failure comes back wrapped with the algorithm, the
// collective, the step and the peer, and as a peer error.
func TestErrorSaysWhere(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := algostest.NewMesh(ctx, 3)
	require.NoError(t, err)
	defer m.Close()
	args := make([]*algos.Args, 3)
	for r := range args {
		args[r] = &algos.Args{Kind: transport.KindAllReduce, DType: transport.Float32, Count: 30,
			Send: make([]byte, 120), Recv: make([]byte, 120)}
	}
	errs := m.Run(ctx, args, func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		if p.Rank() == 0 {
			return errors.New("rank 0 died")
		}
		return ring.Algorithm{}.Run(ctx, p, a)
	})
	// Rank 1 receives from rank 0, which is gone.
	require.ErrorIs(t, errs[1], transport.ErrPeer)
	require.Regexp(t, `^ring: allreduce: step \d+ chunk 0: recv 40 bytes from rank 0 \(tag 0x21`, errs[1].Error())
}

// Steps larger than the eager size run serially on ranks with one P and in the
// sender/receiver pipeline elsewhere; both send the same chunks under the same message
// numbers, so a job may mix them. Half the ranks are made serial here, over inmem links
// (eager size 16 KiB) with 4 KiB chunks, and every collective of the ring is checked
// against a float64 reference of exact (small integer) inputs.
func TestSerialAndPipelinedRanksMix(t *testing.T) {
	defer ring.SetSerialLarge(func(p algos.Peers) bool { return p.Rank()%2 == 0 })()
	in := func(r, i int) float32 { return float32((r*13 + i*7) % 89) }
	for _, w := range []int{2, 3, 4} {
		for _, kind := range []transport.Kind{transport.KindAllReduce, transport.KindReduceScatter,
			transport.KindAllGather, transport.KindBroadcast, transport.KindReduce} {
			n := 30011 // elements: 120 KB, steps of 30-60 KB
			if kind == transport.KindReduceScatter || kind == transport.KindAllGather {
				n = 6007 // per rank: 24 KB blocks
			}
			sendN, recvN := n, n
			switch kind {
			case transport.KindReduceScatter:
				sendN = w * n
			case transport.KindAllGather:
				recvN = w * n
			}
			const root = 1
			args := make([]*algos.Args, w)
			for r := range args {
				send := make([]float32, sendN)
				for i := range send {
					send[i] = in(r, i)
				}
				args[r] = &algos.Args{Kind: kind, DType: transport.Float32, Op: transport.Sum, Count: n, Root: root,
					ChunkBytes: 4096, Send: f32bytes(send), Recv: make([]byte, 4*recvN)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			m, err := algostest.NewMesh(ctx, w)
			require.NoError(t, err)
			require.NoError(t, algostest.FirstError(m.RunAlgorithm(ctx, ring.Algorithm{}, args)), "w%d %s", w, kind)
			m.Close()
			cancel()
			sum := func(i int) float64 {
				s := 0.0
				for r := range w {
					s += float64(in(r, i))
				}
				return s
			}
			for r, a := range args {
				if kind == transport.KindReduce && r != root {
					continue
				}
				got := bytesF32(a.Recv)
				for i, x := range got {
					var want float64
					switch kind {
					case transport.KindAllReduce, transport.KindReduce:
						want = sum(i)
					case transport.KindReduceScatter:
						want = sum(r*n + i)
					case transport.KindAllGather:
						want = float64(in(i/n, i%n))
					case transport.KindBroadcast:
						want = float64(in(root, i))
					}
					require.Equal(t, want, float64(x), "w%d %s rank %d [%d]", w, kind, r, i)
				}
			}
		}
	}
}

func f32bytes(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesF32(b []byte) []float32 {
	xs := make([]float32, len(b)/4)
	for i := range xs {
		xs[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return xs
}

// TestInterleavedTwoRanks: two ranks whose AllReduce output reaches the cold size run
// the interleaved ring (allReduce2) with cold receives for the all-gather. With the
// size lowered to 1 byte, the matrix's two-rank AllReduces that span several chunks
// take that path (checked for one of them), against the serial reference, on serial
// and pipelined ranks, each mixed with the other.
func TestInterleavedTwoRanks(t *testing.T) {
	defer ring.SetColdBytes(1)()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer m.Close()
	interleaves := func(count int) bool {
		a := &algos.Args{Kind: transport.KindAllReduce, DType: transport.Float32, Count: count, ChunkBytes: 1000}
		var got [2]bool
		require.NoError(t, algostest.FirstError(m.Run(ctx, []*algos.Args{a, a}, func(_ context.Context, p algos.Peers, a *algos.Args) error {
			got[p.Rank()] = ring.Interleaves(p, a)
			return nil
		})))
		require.Equal(t, got[0], got[1], "the ranks disagree")
		return got[0]
	}
	require.True(t, interleaves(1000), "a 4000-byte AllReduce in 1000-byte chunks")
	require.True(t, interleaves(501), "segments of 251 and 250 elements")
	require.False(t, interleaves(500), "segments of one chunk")
	// Serial ranks whose links take messages in place (inmem's do) run the fused steps
	// for sums and averages of float32, float64, float16 and bfloat16, where the CPU
	// streams two outputs (reduce.DualStreams); the others, and every other dtype and
	// op, the slots.
	fused := func(dt transport.DType, op transport.Op, serial func(algos.Peers) bool) (got, serialRanks [2]bool) {
		a := &algos.Args{Kind: transport.KindAllReduce, DType: dt, Op: op, Count: 1001, ChunkBytes: 1000}
		require.NoError(t, algostest.FirstError(m.Run(ctx, []*algos.Args{a, a}, func(_ context.Context, p algos.Peers, a *algos.Args) error {
			got[p.Rank()], serialRanks[p.Rank()] = ring.Fused(p, a), serial(p)
			return nil
		})))
		return got, serialRanks
	}
	for name, serial := range map[string]func(algos.Peers) bool{
		"pipelined": func(algos.Peers) bool { return false },
		"serial":    func(algos.Peers) bool { return true },
		"mixed":     func(p algos.Peers) bool { return p.Rank() == 0 },
	} {
		t.Run(name, func(t *testing.T) {
			defer ring.SetSerialLarge(serial)()
			for _, dt := range []transport.DType{transport.Float32, transport.Float64, transport.Float16, transport.BFloat16} {
				for _, op := range []transport.Op{transport.Sum, transport.Avg} {
					got, want := fused(dt, op, serial)
					if !reduce.DualStreams(dt, op, 2) {
						want = [2]bool{}
					}
					require.Equal(t, want, got, "%s %s", dt, op)
				}
			}
			got, _ := fused(transport.Int32, transport.Sum, serial)
			require.Equal(t, [2]bool{}, got, "int32: no two-output kernel")
			got, _ = fused(transport.Float64, transport.Max, serial)
			require.Equal(t, [2]bool{}, got, "max: no two-output kernel")
			algostest.Matrix(t, ring.Algorithm{}, algostest.Options{Worlds: []int{2}, Kinds: []transport.Kind{transport.KindAllReduce},
				Counts: []int{0, 1, 7, 13, 1000, 1001}})
		})
	}
}

// TestFusedBelowColdSize: serial ranks run the fused steps for sums and averages of
// float32, float64, float16 and bfloat16 below the cold size too (their all-gather
// receives then stay in the caches), in place and out of place, and a pipelined rank
// runs allReduce2's slots in the same message order; against the serial reference, on
// serial ranks and on a serial rank mixed with a pipelined one. Other dtypes and ops
// keep the step order (int32 here).
func TestFusedBelowColdSize(t *testing.T) {
	fusedTypes := []transport.DType{transport.Float32, transport.Float64, transport.Float16, transport.BFloat16}
	for _, dt := range fusedTypes {
		if !reduce.DualStreams(dt, transport.Sum, 2) {
			t.Skipf("this CPU has no two-output streaming kernel for %s (AVX2, F16C): the fused steps do not run", dt)
		}
	}
	defer ring.SetColdBytes(1 << 40)()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer m.Close()
	for name, serial := range map[string]func(algos.Peers) bool{
		"serial": func(algos.Peers) bool { return true },
		"mixed":  func(p algos.Peers) bool { return p.Rank() == 1 },
	} {
		t.Run(name, func(t *testing.T) {
			defer ring.SetSerialLarge(serial)()
			for _, dt := range fusedTypes {
				for _, op := range []transport.Op{transport.Sum, transport.Avg} {
					for _, inPlace := range []bool{false, true} {
						send := make([]byte, dt.Size()*1001)
						recv := send
						if !inPlace {
							recv = make([]byte, len(send))
						}
						a := &algos.Args{Kind: transport.KindAllReduce, DType: dt, Op: op, Count: 1001,
							ChunkBytes: 1000, Send: send, Recv: recv}
						var got, want [2]bool
						require.NoError(t, algostest.FirstError(m.Run(ctx, []*algos.Args{a, a}, func(_ context.Context, p algos.Peers, a *algos.Args) error {
							got[p.Rank()], want[p.Rank()] = ring.Fused(p, a), serial(p)
							return nil
						})))
						require.Equal(t, want, got, "%s %s in place %v", dt, op, inPlace)
					}
				}
			}
			for i, n := range []int{0, 1, 7, 1000, 1001, 1999, 20001} {
				for _, dt := range append(fusedTypes, transport.Int32) {
					for _, op := range []transport.Op{transport.Sum, transport.Avg} {
						for _, inPlace := range []bool{false, true} {
							c := algostest.Case{Kind: transport.KindAllReduce, DType: dt, Op: op, Count: n,
								ChunkBytes: 1000, InPlace: inPlace, Seed: uint64(i)}
							require.NoError(t, c.Check(ctx, m, ring.Algorithm{}.Run), "%v", c)
						}
					}
				}
			}
		})
	}
}

// TestInterleaveOrder: interleave lists every chunk of both steps once, each step's
// chunks in order, and all-gather chunk j after reduce-scatter chunk j (the lag of
// one) or after the last one.
func TestInterleaveOrder(t *testing.T) {
	require.Equal(t, []string{"s0", "g0", "s1", "g1", "s2", "g2"}, ring.Interleave(3, 3))
	require.Equal(t, []string{"s0", "g0", "s1", "g1", "g2"}, ring.Interleave(2, 3))
	for nrs := 1; nrs <= 6; nrs++ {
		for _, nag := range []int{nrs - 1, nrs, nrs + 1} {
			order := ring.Interleave(nrs, nag)
			require.Len(t, order, nrs+nag)
			pos := map[string]int{}
			for i, o := range order {
				pos[o] = i
			}
			for i := range nrs {
				require.Contains(t, pos, fmt.Sprintf("s%d", i))
				if i > 0 {
					require.Less(t, pos[fmt.Sprintf("s%d", i-1)], pos[fmt.Sprintf("s%d", i)])
				}
			}
			for j := range nag {
				g := fmt.Sprintf("g%d", j)
				require.Contains(t, pos, g)
				require.Greater(t, pos[g], pos[fmt.Sprintf("s%d", min(j, nrs-1))], "%v", order)
				if j > 0 {
					require.Less(t, pos[fmt.Sprintf("g%d", j-1)], pos[g])
				}
			}
		}
	}
}

// slowSender delays every Send, so that its rank's receiver runs ahead of its sender.
type slowSender struct {
	transport.Conn
	d time.Duration
}

func (s slowSender) Send(ctx context.Context, h transport.Header, p []byte) error {
	time.Sleep(s.d)
	return s.Conn.Send(ctx, h, p)
}

// TestInterleavedSlotsWithSlowSends: out of place, allReduce2 reduces into two scratch
// slots that the all-gather sends from. With the sends slowed and the sender and
// receiver on goroutines of their own, a receiver that reused a slot before its chunk
// went out would send the wrong bytes.
func TestInterleavedSlotsWithSlowSends(t *testing.T) {
	defer ring.SetColdBytes(1)()
	defer ring.SetSerialLarge(func(algos.Peers) bool { return false })()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer m.Close()
	// Rank 1's sends are slowed: its receiver gets rank 0's next reduce-scatter chunk
	// while its sender still holds the all-gather chunk before it.
	m.Wrap(func(r, _ int, c transport.Conn) transport.Conn {
		return slowSender{c, time.Duration(r) * time.Millisecond}
	})
	for i, n := range []int{1000, 1001, 1999} {
		for _, op := range []transport.Op{transport.Sum, transport.Avg} {
			c := algostest.Case{Kind: transport.KindAllReduce, DType: transport.Float32, Op: op, Count: n, ChunkBytes: 200, Seed: uint64(i)}
			require.NoError(t, c.Check(ctx, m, ring.Algorithm{}.Run), "%v", c)
		}
	}
}

// TestColdStepOrder: with the cold size lowered to 1 byte, every AllReduce of 3 and 4
// ranks reduces its last reduce-scatter step with algos.RecvReduceCold (the inmem links
// have no stream, so the message lands in scratch and reduce.Apply3Stream writes Recv:
// non-temporal for float32 sums of 64 elements or more, Apply3 otherwise; averages
// keep RecvReduce) and receives its last all-gather step cold, and so do a
// ReduceScatter's last step, an AllGather's last receive and the last rank of a
// Broadcast's chain: every op of these dtypes, against the serial reference, in place
// and out of place, from 0 to 4M+3 elements.
func TestColdStepOrder(t *testing.T) {
	defer ring.SetColdBytes(1)()
	algostest.Matrix(t, ring.Algorithm{}, algostest.Options{
		Kinds: []transport.Kind{transport.KindAllReduce, transport.KindReduceScatter, transport.KindAllGather,
			transport.KindBroadcast},
		Worlds: []int{2, 3, 4},
		Counts: []int{0, 1, 7, 13, 1000, 4099},
		DTypes: []transport.DType{transport.Float32, transport.Float64, transport.BFloat16, transport.Int32},
		Large:  true,
	})
}

// TestEager: no send of more than the eager size waits for its receiver before this
// rank receives (algostest.CheckEager).
func TestEager(t *testing.T) {
	a := ring.Algorithm{}
	algostest.CheckEager(t, a.Name(), a.Run, a.Supports)
}
