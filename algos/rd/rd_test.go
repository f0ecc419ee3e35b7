package rd_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/rd"
	"github.com/goccl/goccl/transport"
)

func TestMatrix(t *testing.T) {
	algostest.Matrix(t, rd.Algorithm{}, algostest.Options{Large: true})
}

// Above rd.DirectMax ranks the Barrier is the dissemination barrier (the matrix's worlds
// stop at 8): worlds a power of two, one past it, and neither, with a late rank.
func TestDisseminationBarrier(t *testing.T) {
	algostest.Matrix(t, rd.Algorithm{}, algostest.Options{Worlds: []int{rd.DirectMax + 1, 12, 16}, Kinds: []transport.Kind{transport.KindBarrier}})
}

// TestExchange: the communicator's own run of the direct exchange (algos.Exchange) and
// rd's interoperate, on every world that runs small calls that way.
func TestExchange(t *testing.T) {
	algostest.ExchangeMatrix(t, rd.Algorithm{}, []int{1, 2, 3, 4, 5, 8})
}

func TestFailures(t *testing.T) {
	a := rd.Algorithm{}
	algostest.CheckFailures(t, a.Name(), a.Run, a.Supports)
}

// TestBitIdentical checks what the matrix's tolerance cannot: with real-valued float
// inputs, whose sums round differently in different orders, every rank ends with the
// same bits, on both paths (direct exchange and recursive doubling with folded extra
// ranks), in place and out of place. The values are also checked against a float64
// reference, so identical garbage cannot pass.
func TestBitIdentical(t *testing.T) {
	type tc struct {
		dt    transport.DType
		op    transport.Op
		world int
		count int
		chunk int
	}
	var cases []tc
	for _, dt := range []transport.DType{transport.Float32, transport.Float64, transport.Float16, transport.BFloat16} {
		for _, w := range []int{2, 3, 4, 5, 8, 11} {
			for _, n := range []int{1, 7, 1000, 5000, 70001} {
				cases = append(cases, tc{dt, transport.Sum, w, n, 0}, tc{dt, transport.Avg, w, n, 4096})
			}
		}
		cases = append(cases, tc{dt, transport.Prod, 5, 999, 0})
	}
	for _, c := range cases {
		for _, variant := range []string{"in-place", "out-of-place", "mixed"} { // mixed: odd ranks run algos.Exchange, out of place
			if variant == "mixed" && c.count*c.dt.Size() > algos.SmallExchangeMax {
				continue // the communicator runs Exchange only this small
			}
			inPlace := variant == "in-place"
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			m, err := algostest.NewMesh(ctx, c.world)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(c.world), uint64(c.count)))
			esz := c.dt.Size()
			inputs := make([][]float64, c.world)
			args := make([]*algos.Args, c.world)
			for r := range c.world {
				inputs[r] = make([]float64, c.count)
				send := make([]byte, c.count*esz)
				for i := range inputs[r] {
					v := rng.Float64()*2 - 1
					if c.op == transport.Prod {
						v = 1 + v/64 // a product of W values near 1 stays in range
					}
					inputs[r][i] = put(c.dt, send, i, v)
				}
				recv := make([]byte, len(send))
				if inPlace {
					recv = send
				}
				args[r] = &algos.Args{Kind: transport.KindAllReduce, DType: c.dt, Op: c.op, Count: c.count,
					Send: send, Recv: recv, ChunkBytes: c.chunk}
			}
			run := algostest.ExchangeRun(rd.Algorithm{}, func(r int) bool { return variant == "mixed" && r%2 == 1 })
			require.NoError(t, algostest.FirstError(m.Run(ctx, args, run)))
			cancel()
			m.Close()
			for r := 1; r < c.world; r++ {
				require.True(t, bytes.Equal(args[0].Recv, args[r].Recv), "%v %v w=%d n=%d %s: rank %d differs from rank 0",
					c.dt, c.op, c.world, c.count, variant, r)
			}
			for i := range c.count {
				want := 0.0
				if c.op == transport.Prod {
					want = 1
				}
				for r := range c.world {
					if c.op == transport.Prod {
						want *= inputs[r][i]
					} else {
						want += inputs[r][i]
					}
				}
				if c.op == transport.Avg {
					want /= float64(c.world)
				}
				got := get(c.dt, args[0].Recv, i)
				tol := float64(c.world) * 4 * algostest.UnitRoundoff(c.dt) * max(1, math.Abs(want))
				require.InDelta(t, want, got, tol, "%v %v w=%d n=%d element %d", c.dt, c.op, c.world, c.count, i)
			}
		}
	}
}

// eagerPeers gives a mesh's Peers an eager size, as the communicator's do (tcp's links
// promise 1 MiB with 4 MiB socket buffers); inmem's links queue any message.
type eagerPeers struct {
	algos.Peers
	eager int
}

func (p eagerPeers) EagerBytes() int { return p.eager }

// tagLog records the tag of every message a rank sends.
type tagLog struct {
	transport.Conn
	mu   *sync.Mutex
	tags *[]uint32
}

func (c tagLog) Send(ctx context.Context, h transport.Header, payload []byte) error {
	c.mu.Lock()
	*c.tags = append(*c.tags, h.Tag)
	c.mu.Unlock()
	return c.Conn.Send(ctx, h, payload)
}

// TestDirectBytes: under links whose eager size would take the whole vector, from 4
// ranks the direct exchange stops at algos.RDDirectBytes and recursive halving takes
// over (W-1 messages per rank, all with the direct tag, against 2 log2 W, none with
// it); below 4 ranks it goes on to the eager size. Results against algostest's serial
// reference on both sides of the bound, in place and out of place.
func TestDirectBytes(t *testing.T) {
	const eager = 1 << 20
	direct, _ := rd.Algorithm{}.ExchangeTag(0, 2, eager, eager)
	esz := transport.Float32.Size()
	bound := algos.RDDirectBytes / esz
	run := func(ctx context.Context, p algos.Peers, a *algos.Args) error {
		return rd.Algorithm{}.Run(ctx, eagerPeers{p, eager}, a)
	}
	for _, w := range []int{3, 4, 8} {
		for _, count := range []int{bound - 1, bound, bound + 1, 3*bound + 5} {
			for _, inPlace := range []bool{false, true} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				m, err := algostest.NewMesh(ctx, w)
				require.NoError(t, err)
				var mu sync.Mutex
				tags := make([][]uint32, w)
				m.Wrap(func(rank, _ int, c transport.Conn) transport.Conn { return tagLog{c, &mu, &tags[rank]} })
				c := algostest.Case{Kind: transport.KindAllReduce, DType: transport.Float32, Op: transport.Sum,
					Count: count, InPlace: inPlace, ChunkBytes: eager, Seed: uint64(w)}
				require.NoError(t, c.Check(ctx, m, run), "w=%d %v", w, c)
				cancel()
				m.Close()
				isDirect := w < 4 || count*esz <= algos.RDDirectBytes
				msgs := w - 1
				if !isDirect {
					msgs = 2 * (bits.Len(uint(w)) - 1)
				}
				for r := range w {
					require.Len(t, tags[r], msgs, "w=%d %v rank %d: messages sent", w, c, r)
					for _, tg := range tags[r] {
						require.Equal(t, isDirect, tg == direct, "w=%d %v rank %d: tag %#x, direct tag %#x", w, c, r, tg, direct)
					}
				}
			}
		}
	}
}

// put stores v in element i of b as dt and returns the value it stored.
func put(dt transport.DType, b []byte, i int, v float64) float64 {
	ne := binary.NativeEndian
	switch dt {
	case transport.Float64:
		ne.PutUint64(b[8*i:], math.Float64bits(v))
		return v
	case transport.Float32:
		ne.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case transport.BFloat16:
		ne.PutUint16(b[2*i:], uint16(math.Float32bits(float32(v))>>16)) // truncation: any bf16 will do
	case transport.Float16:
		ne.PutUint16(b[2*i:], toHalf(float32(v)))
	}
	return get(dt, b, i)
}

func get(dt transport.DType, b []byte, i int) float64 {
	ne := binary.NativeEndian
	switch dt {
	case transport.Float64:
		return math.Float64frombits(ne.Uint64(b[8*i:]))
	case transport.Float32:
		return float64(math.Float32frombits(ne.Uint32(b[4*i:])))
	case transport.BFloat16:
		return float64(math.Float32frombits(uint32(ne.Uint16(b[2*i:])) << 16))
	}
	return float64(fromHalf(ne.Uint16(b[2*i:])))
}

// toHalf and fromHalf convert normal float16 values in [-2, 2] (all this test uses),
// truncating: the test needs valid halves, not correctly rounded ones.
func toHalf(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23&0xff) - 127 + 15
	if exp <= 0 {
		return sign // flush tiny values to zero
	}
	return sign | uint16(exp)<<10 | uint16(bits>>13&0x3ff)
}

func fromHalf(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h >> 10 & 0x1f)
	if exp == 0 {
		return math.Float32frombits(sign)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | uint32(h&0x3ff)<<13)
}

// TestNotSupported: rd implements AllReduce, Barrier, AllGather and ReduceScatter only,
// and says so.
func TestNotSupported(t *testing.T) {
	a := rd.Algorithm{}
	ours := []transport.Kind{transport.KindAllReduce, transport.KindBarrier, transport.KindAllGather, transport.KindReduceScatter}
	for _, k := range transport.Kinds {
		if slices.Contains(ours, k) {
			require.True(t, a.Supports(k), "%s", k)
			continue
		}
		require.False(t, a.Supports(k), "%s", k)
	}
	err := a.Run(context.Background(), nil, &algos.Args{Kind: transport.KindBroadcast, DType: transport.Float32})
	require.ErrorIs(t, err, transport.ErrNotSupported)
	require.ErrorContains(t, err, "broadcast")
}

// BarrierTag (algos.BarrierExchanger): the Barrier of two ranks, and of no other world,
// is one exchange of empty messages under the tag it names. A rank that sends and
// receives that message itself meets a rank that runs rd's Barrier, and neither leaves
// before the other entered (the late one sleeps first).
func TestBarrierTag(t *testing.T) {
	a := rd.Algorithm{}
	tag, ok := a.BarrierTag(2)
	require.True(t, ok)
	for _, w := range []int{1, 3, 4, 8, 9} {
		_, ok := a.BarrierTag(w)
		require.False(t, ok, "world %d", w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := algostest.NewMesh(ctx, 2)
	require.NoError(t, err)
	defer m.Close()
	for late := range 2 {
		var entered atomic.Int32
		args := []*algos.Args{{Kind: transport.KindBarrier}, {Kind: transport.KindBarrier}}
		errs := m.Run(ctx, args, func(ctx context.Context, p algos.Peers, x *algos.Args) error {
			if p.Rank() == late {
				time.Sleep(5 * time.Millisecond)
			}
			entered.Add(1)
			var err error
			if p.Rank() == 0 {
				err = a.Run(ctx, p, x)
			} else if err = algos.Send(ctx, p, 0, tag, nil); err == nil {
				err = algos.Recv(ctx, p, 0, tag, nil)
			}
			if err == nil && entered.Load() != 2 {
				err = fmt.Errorf("rank %d left the barrier before rank %d entered", p.Rank(), late)
			}
			return err
		})
		require.NoError(t, algostest.FirstError(errs), "late rank %d", late)
	}
}

// TestEager: no send of more than the eager size waits for its receiver before this
// rank receives (algostest.CheckEager).
func TestEager(t *testing.T) {
	a := rd.Algorithm{}
	algostest.CheckEager(t, a.Name(), a.Run, a.Supports)
}
