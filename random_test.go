package goccl

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/internal/p2ptest"
	"github.com/goccl/goccl/internal/seeds"
	"github.com/goccl/goccl/transport"
)

// TestRandomCalls runs seeded random sequences of calls on communicators with random
// settings, and checks every result against algostest's serial reference. The fixed
// tests each look at one path; here the paths meet: every collective, dtype and op in
// one sequence, sizes from 0 to a few MiB, blocking calls, asynchronous ones in
// flight together, and algorithm changes between them, over inmem, shm, tcp and rdma's
// software provider, so that what a communicator keeps from one call for the next
// (the fast paths' picks, the selector's cache, the staging area, the queue) meets
// every kind of next call.
//
// GOCCL_RANDOM_SEEDS=n runs n sequences (a soak) and GOCCL_RANDOM_SEED=s starts them
// at seed s; a failure names its seed and the communicators' settings.
func TestRandomCalls(t *testing.T) {
	n := 12
	if testing.Short() {
		n = 4
	}
	for _, seed := range seeds.List(t, n, 1) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { randomSequence(t, seed) })
	}
}

// randomSetup is a communicator's random settings, the same on every rank.
type randomSetup struct {
	world     int
	transport string
	algo      string
	chunk     int
	params    map[string]string
	tune      bool // algo_tune online
}

func (s randomSetup) String() string {
	keys := make([]string, 0, len(s.params))
	for k := range s.params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var ps []string
	for _, k := range keys {
		ps = append(ps, k+"="+s.params[k])
	}
	return fmt.Sprintf("world=%d transport=%s algo=%q chunk_bytes=%d algo_tune_online=%t params=[%s]", s.world, s.transport,
		s.algo, s.chunk, s.tune, strings.Join(ps, ","))
}

func (s randomSetup) options() []Option {
	opts := []Option{WithTransport(s.transport), WithAlgo(s.algo), WithTimeout(time.Minute)}
	if s.chunk != 0 {
		opts = append(opts, WithChunkBytes(s.chunk))
	}
	for k, v := range s.params {
		opts = append(opts, WithParam(k, v))
	}
	if s.tune {
		opts = append(opts, WithAlgoTune(AlgoTuneOnline))
	}
	return opts
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

// shortTune shortens auto's online schedule (algotune.go) on communicators that tune
// (algo_tune online): every AllReduce above the exchange's size is tuned, among every
// algorithm the model prices, each class's candidates run once each from its first
// call, and the ranks agree after every second call, so that the agreements meet every
// kind of call a short sequence makes.
func shortTune(comms []*Comm) {
	for _, c := range comms {
		if c.algoTune.on {
			c.algoTune.setSchedule(0, 0, 1, 2, math.Inf(1))
		}
	}
}

// randomSpec is an algorithm spec: auto, one registered algorithm, or rules per
// collective and size.
func randomSpec(rng *rand.Rand) string {
	var names []string
	for _, n := range algos.Names() {
		if n != "nccl" && !strings.HasPrefix(n, "test-") { // NCCL needs its library; test- are this package's tests'
			names = append(names, n)
		}
	}
	switch rng.IntN(4) {
	case 0:
		return "auto"
	case 1, 2:
		return pick(rng, names...)
	}
	return fmt.Sprintf("allreduce:%s<%d,%s;broadcast:%s;allgather:%s<4K,%s;reducescatter:%s", pick(rng, names...),
		pick(rng, 64, 1024, 4096, 65536), pick(rng, names...), pick(rng, names...), pick(rng, names...),
		pick(rng, names...), pick(rng, names...))
}

func randomSettings(rng *rand.Rand) randomSetup {
	s := randomSetup{world: pick(rng, 1, 2, 2, 2, 3, 3, 4, 4, 5), params: map[string]string{}}
	transports := []string{"inmem", "shm", "tcp", "rdma"}
	if raceEnabled {
		transports = []string{"inmem", "tcp", "rdma"} // see race_on_test.go
	}
	s.transport = pick(rng, transports...)
	s.algo = randomSpec(rng)
	s.chunk = pick(rng, 0, 0, 4096, 24576, 1<<20)
	if strings.Contains(s.transport, "shm") {
		if rng.IntN(2) == 0 {
			ring := pick(rng, 64<<10, 256<<10)
			s.params["shm.ring_bytes"] = strconv.Itoa(ring)
			s.params["shm.chunk_bytes"] = strconv.Itoa(pick(rng, 4<<10, ring/4, ring/2))
		}
		s.params["shm.stream_stores"] = pick(rng, "auto", "true", "false")
		s.params["shm.single_copy"] = pick(rng, "auto", "true", "false")
		s.params["shm.single_copy_min"] = pick(rng, "", "", "64K", "1M")
		s.params["shm.staged_min"] = pick(rng, "", "0", "4K", "off")
		s.params["shm.direct_min"] = pick(rng, "", "0", "64K", "off")
		if rng.IntN(2) == 0 {
			s.params["shm.staging_bytes"] = pick(rng, "4K", "64K", "1M")
		}
	}
	if s.transport == "rdma" { // the software provider: the protocol over loopback, no RDMA hardware here
		s.params["rdma.provider"] = "soft"
		s.params["rdma.qps_per_peer"] = pick(rng, "", "2")
		switch rng.IntN(3) {
		case 1: // the smallest slots, and enough of them for two 16 KiB messages (the eager floor)
			s.params["rdma.chunk_bytes"], s.params["rdma.credits"] = "4096", pick(rng, "10", "32")
		case 2:
			s.params["rdma.chunk_bytes"], s.params["rdma.credits"] = "64K", pick(rng, "", "2")
		}
	}
	if strings.Contains(s.transport, "tcp") {
		s.params["tcp.sockets"] = strconv.Itoa(1 + rng.IntN(3))
		s.params["tcp.stripe_min"] = pick(rng, "", "4K", "64K")
		s.params["tcp.bufsize"] = pick(rng, "", "", "64K", "256K")
	}
	for k, v := range s.params {
		if v == "" {
			delete(s.params, k)
		}
	}
	// Half the setups tune auto online, decided from the settings drawn so far rather
	// than by another draw, so that each seed's calls stay what they were before the
	// tuner existed.
	h := fnv.New32a()
	h.Write([]byte(s.String()))
	s.tune = h.Sum32()%2 == 0
	return s
}

var (
	randomKinds = []transport.Kind{transport.KindAllReduce, transport.KindReduce, transport.KindBroadcast,
		transport.KindAllGather, transport.KindReduceScatter, transport.KindGather, transport.KindScatter,
		transport.KindAllToAll, transport.KindSendRecv, transport.KindBarrier}
	randomDTypes = []transport.DType{transport.Int8, transport.Uint8, transport.Int32, transport.Uint32,
		transport.Int64, transport.Uint64, transport.Float16, transport.BFloat16, transport.Float32, transport.Float64}
	randomOps = []transport.Op{transport.Sum, transport.Prod, transport.Min, transport.Max, transport.Avg}
)

// randomCase is one call: its count is 0, 1, a small odd or uneven count, a few
// thousand elements, or up to about 4 MiB of buffer per rank.
func randomCase(rng *rand.Rand, world int) algostest.Case {
	c := algostest.Case{Kind: pick(rng, randomKinds...), DType: pick(rng, randomDTypes...), Op: pick(rng, randomOps...),
		Root: rng.IntN(world), InPlace: rng.IntN(2) == 0, Seed: rng.Uint64()}
	switch r := rng.IntN(20); {
	case r == 0:
		c.Count = 0
	case r == 1:
		c.Count = 1
	case r < 10:
		c.Count = 2 + rng.IntN(60)
	case r < 17:
		c.Count = rng.IntN(5000)
	default:
		c.Count = rng.IntN((4 << 20) / c.DType.Size())
	}
	switch c.Kind {
	case transport.KindAllGather, transport.KindGather, transport.KindReduceScatter, transport.KindScatter,
		transport.KindAllToAll:
		c.Count /= world // the buffers hold world blocks
	case transport.KindSendRecv: // Root is the shift: rank r sends to r+Root, another rank
		if world == 1 {
			c.Kind = transport.KindAllReduce
		} else {
			c.Root = 1 + rng.IntN(world-1)
		}
	case transport.KindBarrier:
		c.Count, c.DType, c.InPlace = 0, transport.Float32, false
	}
	if c.DType.IsFloat() && (c.Op == transport.Sum || c.Op == transport.Avg) && rng.IntN(3) == 0 {
		c.Values = algostest.Real
	}
	return c
}

// commIssue calls a on rank p's communicator, blocking or as an asynchronous Work.
func commIssue(comms []*Comm, async bool) algostest.IssueFunc {
	return func(ctx context.Context, p algos.Peers, a *algos.Args) (func() error, error) {
		c := comms[p.Rank()]
		send, recv := Host(a.Send), Host(a.Recv)
		var w *Work
		var err error
		switch a.Kind {
		case transport.KindAllReduce:
			if !async {
				err = c.AllReduce(ctx, send, recv, a.Count, a.DType, a.Op)
			} else {
				w = c.AllReduceAsync(ctx, send, recv, a.Count, a.DType, a.Op)
			}
		case transport.KindReduce:
			if !async {
				err = c.Reduce(ctx, send, recv, a.Count, a.DType, a.Op, a.Root)
			} else {
				w = c.ReduceAsync(ctx, send, recv, a.Count, a.DType, a.Op, a.Root)
			}
		case transport.KindBroadcast:
			if !async {
				err = c.Broadcast(ctx, send, recv, a.Count, a.DType, a.Root)
			} else {
				w = c.BroadcastAsync(ctx, send, recv, a.Count, a.DType, a.Root)
			}
		case transport.KindAllGather:
			if !async {
				err = c.AllGather(ctx, send, recv, a.Count, a.DType)
			} else {
				w = c.AllGatherAsync(ctx, send, recv, a.Count, a.DType)
			}
		case transport.KindReduceScatter:
			if !async {
				err = c.ReduceScatter(ctx, send, recv, a.Count, a.DType, a.Op)
			} else {
				w = c.ReduceScatterAsync(ctx, send, recv, a.Count, a.DType, a.Op)
			}
		case transport.KindGather:
			if !async {
				err = c.Gather(ctx, send, recv, a.Count, a.DType, a.Root)
			} else {
				w = c.GatherAsync(ctx, send, recv, a.Count, a.DType, a.Root)
			}
		case transport.KindScatter:
			if !async {
				err = c.Scatter(ctx, send, recv, a.Count, a.DType, a.Root)
			} else {
				w = c.ScatterAsync(ctx, send, recv, a.Count, a.DType, a.Root)
			}
		case transport.KindAllToAll:
			if !async {
				err = c.AllToAll(ctx, send, recv, a.Count, a.DType)
			} else {
				w = c.AllToAllAsync(ctx, send, recv, a.Count, a.DType)
			}
		case transport.KindSendRecv:
			if !async {
				err = c.SendRecv(ctx, send, a.SendPeer, recv, a.RecvPeer, a.Count, a.DType)
			} else {
				w = c.SendRecvAsync(ctx, send, a.SendPeer, recv, a.RecvPeer, a.Count, a.DType)
			}
		case transport.KindBarrier:
			if !async {
				err = c.Barrier(ctx)
			} else {
				w = c.BarrierAsync(ctx)
			}
		default:
			return nil, fmt.Errorf("commIssue: %s", a.Kind)
		}
		if w == nil {
			return func() error { return nil }, err
		}
		return func() error { return w.Wait(ctx) }, nil
	}
}

// randomSequence runs one seed's communicators and calls.
func randomSequence(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(splitmix(seed), splitmix(^seed))) // neighbouring seeds, unrelated draws
	s := randomSettings(rng)
	t.Logf("seed %d: %v", seed, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	comms, err := InitLocal(ctx, s.world, s.options()...)
	require.NoError(t, err, "seed %d: %v", seed, s)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	shortTune(comms)
	calls := 40
	if raceEnabled {
		calls = 15
	}
	require.NoError(t, randomCalls(ctx, t, rng, comms, calls, 2), "seed %d: %v", seed, s)
}

// randomCalls runs calls random calls on comms (a whole world, rank order), with
// shared memory allocated and freed, the spec changed, and the world split between
// them (splits levels deep: communicators split from split ones), and returns the
// first wrong result or failure.
func randomCalls(ctx context.Context, t *testing.T, rng *rand.Rand, comms []*Comm, calls, splits int) error {
	w := len(comms)
	mesh, err := algostest.NewMesh(ctx, w) // runs the ranks' goroutines; its links go unused
	if err != nil {
		return err
	}
	defer mesh.Close()
	var shared *sharedArena
	defer func() {
		if shared != nil {
			shared.free(ctx)
		}
	}()
	for i := 0; i < calls; {
		// Half the batches take their buffers from AllocShared memory while there is
		// some, as far as it goes: some calls then find every rank's buffers there,
		// others only some ranks'.
		var alloc func(rank, n int) []byte
		if shared != nil && rng.IntN(2) == 0 {
			shared.reset()
			alloc = shared.alloc
		}
		switch r := rng.IntN(13); {
		case r == 0: // every rank allocates shared memory, or frees it
			if shared == nil {
				if shared, err = newSharedArena(ctx, comms, 1+rng.IntN(24<<20)); err != nil {
					return fmt.Errorf("AllocShared: %w", err)
				}
				t.Logf("world %d: AllocShared(%d)", w, len(shared.mem[0]))
			} else {
				err, shared = shared.free(ctx), nil
				if err != nil {
					return fmt.Errorf("FreeShared: %w", err)
				}
				t.Logf("world %d: FreeShared", w)
			}
		case r == 1: // every rank changes the spec at the same point of its sequence
			spec := randomSpec(rng)
			for _, c := range comms {
				if err := c.SetAlgo(spec); err != nil {
					return fmt.Errorf("SetAlgo(%q): %w", spec, err)
				}
			}
			t.Logf("world %d: SetAlgo(%q)", w, spec)
		case r == 2 && splits > 0 && w > 1:
			n := 3 + rng.IntN(6)
			if err := randomSplit(ctx, t, rng, comms, n, splits-1); err != nil {
				return fmt.Errorf("calls %d-%d, on communicators split off: %w", i, i+n-1, err)
			}
			i += n
		case r == 3: // an AllToAllV or a BatchSendRecv, blocking or queued
			if err := randomP2P(ctx, rng, comms, i); err != nil {
				return fmt.Errorf("world %d, call %d: %w", w, i, err)
			}
			i++
		case r < 6: // several asynchronous calls in flight together
			batch := make([]algostest.Case, 2+rng.IntN(4))
			for j := range batch {
				batch[j] = randomCase(rng, w)
			}
			if err := algostest.CheckBatch(ctx, mesh, batch, commIssue(comms, true), alloc); err != nil {
				return fmt.Errorf("world %d, calls %d-%d (shared %t): %w", w, i, i+len(batch)-1, alloc != nil, err)
			}
			i += len(batch)
		default:
			c := randomCase(rng, w)
			async := rng.IntN(4) == 0
			if err := algostest.CheckBatch(ctx, mesh, []algostest.Case{c}, commIssue(comms, async), alloc); err != nil {
				return fmt.Errorf("world %d, call %d (async %t, shared %t): %w", w, i, async, alloc != nil, err)
			}
			i++
		}
	}
	return nil
}

// randomP2P runs one AllToAllV (uneven random counts, 0 to 1 MiB a block, in place or
// apart) or one BatchSendRecv (random messages in a random order on each rank, P2PMessage)
// on every rank, blocking or queued, and checks every byte received against its
// sender's formula (p2ptest.Bytes); tag is the call's number in the sequence.
func randomP2P(ctx context.Context, rng *rand.Rand, comms []*Comm, tag int) error {
	w, async := len(comms), rng.IntN(2) == 0
	wait := func(err error, work *Work) error {
		if work != nil {
			return work.Wait(ctx)
		}
		return err
	}
	if rng.IntN(2) == 0 {
		dt, inPlace := pick(rng, randomDTypes...), rng.IntN(2) == 0
		esz := dt.Size()
		counts := make([][]int, w)
		for src := range counts {
			counts[src] = make([]int, w)
			for dst := range counts[src] {
				counts[src][dst] = pick(rng, 0, 1, 2+rng.IntN(60), rng.IntN(5000), rng.IntN((1<<20)/esz))
			}
		}
		errs := runRanksInternal(comms, func(c *Comm) error {
			me := c.Rank()
			send, sc, rc, recvN := p2ptest.Blocks(me, w, esz, tag, func(src, dst int) int { return counts[src][dst] })
			recv := make([]byte, recvN)
			sb := Host(send)
			if inPlace {
				buf := make([]byte, max(len(send), recvN))
				copy(buf, send)
				sb, recv = Host(buf[:len(send)]), buf[:recvN]
			}
			var err error
			var work *Work
			if async {
				work = c.AllToAllVAsync(ctx, sb, sc, Host(recv), rc, dt)
			} else {
				err = c.AllToAllV(ctx, sb, sc, Host(recv), rc, dt)
			}
			if err := wait(err, work); err != nil {
				return err
			}
			if err := p2ptest.CheckBlocks(recv, me, esz, tag, rc); err != nil {
				return fmt.Errorf("rank %d: AllToAllV %s (in place %t, async %t): %w", me, dt, inPlace, async, err)
			}
			return nil
		})
		return errors.Join(errs...)
	}
	msgs, order := p2ptest.Random(rng.Uint64(), w, 1+rng.IntN(4*w), 1+rng.IntN(1<<19))
	errs := runRanksInternal(comms, func(c *Comm) error {
		me := c.Rank()
		pops, verify := p2ptest.Ops(msgs, order[me], me, tag<<8)
		ops := make([]P2POp, len(pops))
		for i, o := range pops {
			ops[i] = P2POp{Peer: o.Peer, Recv: o.Recv, Buf: Host(o.Buf), Count: o.Count, DType: o.DType}
		}
		var err error
		var work *Work
		if async {
			work = c.BatchSendRecvAsync(ctx, ops)
		} else {
			err = c.BatchSendRecv(ctx, ops)
		}
		if err := wait(err, work); err != nil {
			return err
		}
		if err := verify(); err != nil {
			return fmt.Errorf("rank %d: BatchSendRecv (async %t): %w", me, async, err)
		}
		return nil
	})
	return errors.Join(errs...)
}

// randomSplit splits comms by random colors (some ranks in none) and keys, checks each
// rank's place in its new communicator against Split's rule (by key, ties by old rank),
// runs n random calls on every new communicator at once (splitting them further,
// splits levels deep), and closes them.
func randomSplit(ctx context.Context, t *testing.T, rng *rand.Rand, comms []*Comm, n, splits int) error {
	w := len(comms)
	colors, keys := make([]int, w), make([]int, w)
	for r := range w {
		colors[r], keys[r] = rng.IntN(3)-1, rng.IntN(3)
	}
	subs := make([]*Comm, w)
	errs := runRanksInternal(comms, func(c *Comm) error {
		var err error
		subs[c.rank], err = c.Split(ctx, colors[c.rank], keys[c.rank])
		return err
	})
	defer func() {
		for _, c := range subs {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("Split(colors %v, keys %v): %w", colors, keys, err)
	}
	t.Logf("world %d: Split(colors %v, keys %v)", w, colors, keys)
	var groups [][]*Comm
	for color := range 2 {
		var old []int
		for r := range w {
			if colors[r] == color {
				old = append(old, r)
			}
		}
		slices.SortStableFunc(old, func(a, b int) int { return keys[a] - keys[b] })
		group := make([]*Comm, len(old))
		for i, r := range old {
			if c := subs[r]; c == nil || c.Rank() != i || c.Size() != len(old) {
				return fmt.Errorf("Split(colors %v, keys %v): old rank %d: want rank %d of %d", colors, keys, r, i, len(old))
			}
			group[i] = subs[r]
		}
		if len(group) > 0 {
			groups = append(groups, group)
		}
	}
	for r := range w {
		if colors[r] < 0 && subs[r] != nil {
			return fmt.Errorf("Split(colors %v, keys %v): old rank %d, of no color, got a communicator", colors, keys, r)
		}
	}
	gerrs := make([]error, len(groups))
	var wg sync.WaitGroup
	for g, group := range groups {
		grng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			gerrs[g] = randomCalls(ctx, t, grng, group, n, splits)
		}()
	}
	wg.Wait()
	return errors.Join(gerrs...)
}

// sharedArena is one AllocShared block per rank, handed out front to back.
type sharedArena struct {
	comms []*Comm
	mem   [][]byte
	used  []int
}

// newSharedArena has every rank allocate n bytes of shared memory, all at once (the
// call is collective).
func newSharedArena(ctx context.Context, comms []*Comm, n int) (*sharedArena, error) {
	a := &sharedArena{comms: comms, mem: make([][]byte, len(comms)), used: make([]int, len(comms))}
	errs := runRanksInternal(comms, func(c *Comm) error {
		var err error
		a.mem[c.rank], err = c.AllocShared(ctx, n)
		return err
	})
	return a, errors.Join(errs...)
}

// alloc is n bytes of rank's block, or ordinary memory once the block is used up.
func (a *sharedArena) alloc(rank, n int) []byte {
	if a.used[rank]+n > len(a.mem[rank]) {
		return make([]byte, n)
	}
	b := a.mem[rank][a.used[rank] : a.used[rank]+n : a.used[rank]+n]
	a.used[rank] += n
	return b
}

// reset hands the blocks out again from the front, for a batch once the last has ended.
func (a *sharedArena) reset() { clear(a.used) }

func (a *sharedArena) free(ctx context.Context) error {
	return errors.Join(runRanksInternal(a.comms, func(c *Comm) error { return c.FreeShared(ctx, a.mem[c.rank]) })...)
}

// splitmix is SplitMix64's finaliser: it spreads neighbouring seeds apart.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
