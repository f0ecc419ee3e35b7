package nccl

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
	"github.com/goccl/goccl/transport/transporttest"
)

func TestRegistered(t *testing.T) {
	tr, err := transport.Lookup(Name)
	require.NoError(t, err)
	require.Equal(t, "nccl", tr.Name())
}

func TestOpenWithoutLibraries(t *testing.T) {
	ctx := context.Background()
	store := rendezvous.NewMemStore()
	defer store.Close()
	_, err := Transport{}.Open(ctx, transport.Local{CommID: "x", Rank: 0, World: 1,
		Params: transport.Params{"nccl.lib": "/nonexistent/libnccl.so.2"}})
	require.ErrorIs(t, err, transport.ErrNotSupported)
	if !dl.Supported {
		require.Contains(t, err.Error(), "without cgo")
		return
	}
	require.Contains(t, err.Error(), "nccl.lib = /nonexistent/libnccl.so.2")

	spec := LibrarySpec("")
	require.Contains(t, spec.Searched(), "nvidia/nccl/lib")
	if _, err := LoadLibrary(""); err == nil {
		t.Log("an NCCL library is installed here; skipping the not-found message check")
	} else {
		require.ErrorIs(t, err, transport.ErrNotSupported)
		require.Contains(t, err.Error(), "libnccl.so.2")
		require.Contains(t, err.Error(), "system library path")
	}
	_, err = Transport{}.Open(ctx, transport.Local{CommID: "x", Rank: 2, World: 2, Store: store})
	require.ErrorIs(t, err, transport.ErrInvalid)
	_, err = Transport{}.Open(ctx, transport.Local{CommID: "x", Rank: 0, World: 2})
	require.ErrorIs(t, err, transport.ErrInvalid)
}

func TestLoadFakeLibraries(t *testing.T) {
	p, _ := useFakes(t, false)
	l, err := LoadLibrary(p["nccl.lib"])
	require.NoError(t, err)
	require.Equal(t, 23007, l.Version())
	require.True(t, l.HasConfig())
	old, err := LoadLibrary(fakes.OldNCCL)
	require.NoError(t, err)
	require.Equal(t, 21212, old.Version())
	require.False(t, old.HasConfig(), "2.12 has no ncclCommInitRankConfig; it must load as optional")
	require.Zero(t, old.f.allToAll)
	require.Zero(t, old.f.lastError)
}

// TestConformance runs the transport contract suite over the fake libraries: two fake
// GPUs, ranks as goroutines. The close checks are skipped because NCCL, like the fake,
// cannot see that a peer closed its communicator: a Send or Recv blocked on a closed
// peer ends at its context's deadline, with an abort (TestTimeoutAborts checks that).
func TestConformance(t *testing.T) {
	p, _ := useFakes(t, false)
	transporttest.Run(t, Transport{}, transporttest.Options{Params: p, Worlds: []int{2, 3}, MaxMessage: 1 << 18,
		Timeout: 20 * time.Second, SkipClose: true})
}

func TestConformancePinnedOldNCCL(t *testing.T) {
	p, _ := useFakes(t, true)
	p["nccl.p2p_buffer"] = "pinned"
	transporttest.Run(t, Transport{}, transporttest.Options{Params: p, Worlds: []int{2}, MaxMessage: 1 << 16,
		Timeout: 20 * time.Second, SkipClose: true})
}

// openAll opens world endpoints concurrently, as separate processes would.
func openAll(t *testing.T, world int, p transport.Params) []*endpoint {
	t.Helper()
	store := rendezvous.NewMemStore()
	t.Cleanup(func() { store.Close() })
	comm := transporttest.CommID("nccl-test")
	eps := make([]*endpoint, world)
	for r := range world {
		ep, err := Transport{}.Open(context.Background(), transporttest.Local(comm, r, world, store,
			transporttest.Options{Params: p, Timeout: 20 * time.Second}))
		require.NoError(t, err)
		eps[r] = ep.(*endpoint)
		t.Cleanup(func() { ep.Close() })
	}
	return eps
}

// onAll runs f for every rank concurrently and returns the errors by rank.
func onAll(n int, f func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r) }()
	}
	wg.Wait()
	return errs
}

func TestConfigAndDevicesReachNCCL(t *testing.T) {
	p, log := useFakes(t, false)
	p["nccl.min_ctas"] = "2"
	eps := openAll(t, 2, p)
	ctx := context.Background()
	for _, err := range onAll(2, func(r int) error {
		return eps[r].Offload(ctx, &transport.Collective{Kind: transport.KindBarrier})
	}) {
		require.NoError(t, err)
	}
	inits := calls(t, log, "ncclCommInitRankConfig")
	require.Len(t, inits, 2)
	for _, l := range inits {
		var dev, n, rank, ok int
		_, err := fmt.Sscanf(l, "ncclCommInitRankConfig dev=%d nranks=%d rank=%d uidok=%d", &dev, &n, &rank, &ok)
		require.NoError(t, err)
		require.Equal(t, rank, dev, "rank %d must init on device %d (rank %% 2 devices)", rank, rank)
		require.Equal(t, 1, ok, "ncclUniqueId did not arrive by value: %s", l)
		require.Contains(t, l, "size=48 magic=0xcafebeef version=21800 blocking=0 cga=-2147483648 minCTAs=2 maxCTAs=-2147483648 netName=NULL splitShare=-2147483648")
	}
	ar := calls(t, log, "ncclAllReduce")
	require.Len(t, ar, 2)
	require.Contains(t, ar[0], "count=1 dt=2 op=0")
}

func le(dt transport.DType, b []byte, i int) float64 {
	switch dt {
	case transport.Int32:
		return float64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	case transport.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case transport.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	case transport.Uint8:
		return float64(b[i])
	}
	panic("dtype not used in tests")
}

func put(dt transport.DType, b []byte, i int, v float64) {
	switch dt {
	case transport.Int32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(v)))
	case transport.Float32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case transport.Float64:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	case transport.Uint8:
		b[i] = byte(v)
	}
}

// input is rank r's element i: small integers, exact in every dtype and under any order.
func input(r, i int) float64 { return float64((r*7+i*3)%11 + 1) }

func reduceRef(op transport.Op, vals []float64, dt transport.DType) float64 {
	acc := vals[0]
	for _, v := range vals[1:] {
		switch op {
		case transport.Sum, transport.Avg:
			acc += v
		case transport.Prod:
			acc *= v
		case transport.Max:
			acc = math.Max(acc, v)
		case transport.Min:
			acc = math.Min(acc, v)
		}
	}
	if op == transport.Avg {
		acc /= float64(len(vals))
		if !dt.IsFloat() {
			acc = math.Trunc(acc)
		}
	}
	return acc
}

// TestOffload checks every collective through the fake NCCL against a float64 serial
// reference, with device buffers and with host buffers (staged), for counts 0, 1, odd
// and large.
func TestOffload(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("old=%v", old), func(t *testing.T) {
			p, _ := useFakes(t, old)
			const w = 3
			eps := openAll(t, w, p)
			kinds := []transport.Kind{transport.KindAllReduce, transport.KindReduce, transport.KindBroadcast,
				transport.KindAllGather, transport.KindReduceScatter, transport.KindAllToAll, transport.KindGather,
				transport.KindScatter, transport.KindSendRecv}
			for _, kind := range kinds {
				for _, dt := range []transport.DType{transport.Float32, transport.Int32, transport.Float64} {
					for _, count := range []int{0, 1, 7, 10007} {
						for _, op := range []transport.Op{transport.Sum, transport.Max, transport.Avg} {
							if op != transport.Sum && kind != transport.KindAllReduce && kind != transport.KindReduceScatter {
								continue
							}
							for _, onDevice := range []bool{true, false} {
								name := fmt.Sprintf("%s/%s/%s/n=%d/device=%v", kind, dt, op, count, onDevice)
								checkCollective(t, name, eps, kind, dt, op, count, 1, onDevice)
							}
						}
					}
				}
			}
		})
	}
}

func sizes(kind transport.Kind, w, cb int) (send, recv int) {
	switch kind {
	case transport.KindAllGather, transport.KindGather:
		return cb, w * cb
	case transport.KindReduceScatter, transport.KindScatter:
		return w * cb, cb
	case transport.KindAllToAll:
		return w * cb, w * cb
	}
	return cb, cb
}

func checkCollective(t *testing.T, name string, eps []*endpoint, kind transport.Kind, dt transport.DType, op transport.Op, count, root int, onDevice bool) {
	t.Helper()
	w := len(eps)
	es := dt.Size()
	cb := count * es
	sn, rn := sizes(kind, w, cb)
	sends, recvs := make([][]byte, w), make([][]byte, w)
	for r := range w {
		sends[r], recvs[r] = make([]byte, sn), make([]byte, rn)
		for i := 0; i < sn/es; i++ {
			put(dt, sends[r], i, input(r, i))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := onAll(w, func(r int) error {
		c := &transport.Collective{Kind: kind, Count: count, DType: dt, Op: op, Root: root,
			SendPeer: (r + 1) % w, RecvPeer: (r + w - 1) % w}
		if !onDevice {
			c.Send, c.Recv = transport.HostBuffer(sends[r]), transport.HostBuffer(recvs[r])
			return eps[r].Offload(ctx, c)
		}
		dev := eps[r].dev
		sp, err := dev.Malloc(sn)
		if err != nil {
			return err
		}
		defer dev.Free(sp)
		rp, err := dev.Malloc(rn)
		if err != nil {
			return err
		}
		defer dev.Free(rp)
		if err := dev.CopyHtoD(sp, sends[r]); err != nil {
			return err
		}
		c.Send, c.Recv = dev.Buffer(sp, sn), dev.Buffer(rp, rn)
		if err := eps[r].Offload(ctx, c); err != nil {
			return err
		}
		return dev.CopyDtoH(recvs[r], rp)
	})
	for r, err := range errs {
		require.NoError(t, err, "%s rank %d", name, r)
	}
	col := func(i int) []float64 {
		v := make([]float64, w)
		for r := range w {
			v[r] = input(r, i)
		}
		return v
	}
	for r := range w {
		for i := 0; i < rn/es; i++ {
			var want float64
			switch kind {
			case transport.KindAllReduce:
				want = reduceRef(op, col(i), dt)
			case transport.KindReduce:
				if r != root {
					continue
				}
				want = reduceRef(op, col(i), dt)
			case transport.KindBroadcast:
				want = input(root, i)
			case transport.KindAllGather:
				want = input(i/count, i%count)
			case transport.KindGather:
				if r != root {
					continue
				}
				want = input(i/count, i%count)
			case transport.KindReduceScatter:
				want = reduceRef(op, col(r*count+i), dt)
			case transport.KindScatter:
				want = input(root, r*count+i)
			case transport.KindAllToAll:
				want = input(i/count, r*count+i%count)
			case transport.KindSendRecv:
				want = input((r+w-1)%w, i)
			}
			exp := make([]byte, es) // the reference rounded once to the dtype, as NCCL rounds
			put(dt, exp, 0, want)
			require.Equal(t, le(dt, exp, 0), le(dt, recvs[r], i), "%s rank %d element %d", name, r, i)
		}
	}
}

func TestOffloadBadInput(t *testing.T) {
	p, _ := useFakes(t, false)
	eps := openAll(t, 1, p)
	e := eps[0]
	ctx := context.Background()
	dev1, err := e.rt.Device(1)
	require.NoError(t, err)
	ptr, err := dev1.Malloc(64)
	require.NoError(t, err)
	defer dev1.Free(ptr)
	for _, tc := range []struct {
		c    transport.Collective
		want string
	}{
		{transport.Collective{Kind: transport.KindAllReduce, Count: 16, DType: transport.Float32,
			Send: dev1.Buffer(ptr, 64), Recv: dev1.Buffer(ptr, 64)}, "on cuda device 1 but rank 0's communicator is on device 0"},
		{transport.Collective{Kind: transport.KindAllReduce, Count: 16, DType: transport.Float32,
			Send: transport.HostBuffer(make([]byte, 63)), Recv: transport.HostBuffer(make([]byte, 64))}, "send buffer on rank 0 is 63 bytes, the collective needs 64"},
		{transport.Collective{Kind: transport.KindBroadcast, Count: 1, DType: transport.Float32, Root: 1}, "root 1 outside 0..0"},
		{transport.Collective{Kind: transport.KindAllReduce, Count: -1, DType: transport.Float32}, "count -1"},
		{transport.Collective{Kind: transport.KindAllReduce, Count: 1, DType: transport.DType(77)}, "unknown dtype"},
		{transport.Collective{Kind: transport.KindSendRecv, Count: 1, DType: transport.Int8, SendPeer: 3, RecvPeer: -1}, "sendrecv peers"},
	} {
		err := e.Offload(ctx, &tc.c)
		require.ErrorIs(t, err, transport.ErrInvalid, tc.want)
		require.Contains(t, err.Error(), tc.want)
	}
}

func TestNCCLErrorTranslation(t *testing.T) {
	p, _ := useFakes(t, false)
	eps := openAll(t, 2, p)
	ctx := context.Background()
	buf := func() transport.Buffer { return transport.HostBuffer(make([]byte, 16)) }
	ar := func(r int) error {
		return eps[r].Offload(ctx, &transport.Collective{Kind: transport.KindAllReduce, Count: 4, DType: transport.Float32, Send: buf(), Recv: buf()})
	}
	for _, err := range onAll(2, ar) { // creates the communicator
		require.NoError(t, err)
	}
	t.Setenv("FAKE_FAIL", "ncclAllReduce=5")
	for _, err := range onAll(2, ar) {
		var ne *Error
		require.ErrorAs(t, err, &ne)
		require.Equal(t, InvalidUsage, ne.Code)
		require.Equal(t, "ncclAllReduce", ne.Call)
		require.Contains(t, ne.Text, "invalid usage")
		require.Equal(t, "fake injected failure in ncclAllReduce", ne.Last)
		require.ErrorIs(t, err, transport.ErrInvalid)
	}
	t.Setenv("FAKE_FAIL", "ncclAsync=6")
	for _, err := range onAll(2, ar) {
		require.ErrorIs(t, err, transport.ErrPeer, "an async ncclRemoteError must surface as ErrPeer")
	}
	t.Setenv("FAKE_FAIL", "")
	for _, err := range onAll(2, ar) {
		require.Error(t, err, "the communicator is dead after an async error")
	}
}

func TestTimeoutAborts(t *testing.T) {
	p, log := useFakes(t, false)
	eps := openAll(t, 2, p)
	ctx := context.Background()
	for _, err := range onAll(2, func(r int) error {
		return eps[r].Offload(ctx, &transport.Collective{Kind: transport.KindBarrier})
	}) {
		require.NoError(t, err)
	}
	// Rank 1 never joins: rank 0's allreduce must end with a timeout and an abort.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err := eps[0].Offload(short, &transport.Collective{Kind: transport.KindBarrier})
	require.ErrorIs(t, err, transport.ErrTimeout)
	require.Contains(t, err.Error(), "communicator aborted")
	require.NotEmpty(t, calls(t, log, "ncclCommAbort"))
	err = eps[0].Offload(ctx, &transport.Collective{Kind: transport.KindBarrier})
	require.ErrorIs(t, err, transport.ErrTimeout, "later calls report the abort's cause")
}

func TestPeerWithoutNCCLFailsFast(t *testing.T) {
	p, _ := useFakes(t, false)
	store := rendezvous.NewMemStore()
	defer store.Close()
	comm := transporttest.CommID("nccl-missing")
	bad := transport.Params{"nccl.lib": "/nonexistent/libnccl.so.2"}
	_, err := Transport{}.Open(context.Background(), transporttest.Local(comm, 1, 2, store, transporttest.Options{Params: bad}))
	require.ErrorIs(t, err, transport.ErrNotSupported)
	ep, err := Transport{}.Open(context.Background(), transporttest.Local(comm, 0, 2, store, transporttest.Options{Params: p}))
	require.NoError(t, err)
	defer ep.Close()
	err = ep.(*endpoint).Offload(context.Background(), &transport.Collective{Kind: transport.KindBarrier})
	require.ErrorIs(t, err, transport.ErrPeer)
	require.Contains(t, err.Error(), "rank 1 cannot run NCCL")
}

func TestStager(t *testing.T) {
	p, _ := useFakes(t, false)
	rt, err := cuda.Load(p["cuda.lib"])
	require.NoError(t, err)
	s := NewStager(rt)
	dev, err := rt.Device(1)
	require.NoError(t, err)
	ctx := context.Background()
	pinned, free, err := s.PinnedAlloc(directLimit + 9)
	require.NoError(t, err)
	defer free()
	for _, n := range []int{0, 1, 1001, directLimit + 9, 3*chunk + 5} {
		ptr, err := dev.Malloc(n)
		require.NoError(t, err)
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*13 + n)
		}
		buf := dev.Buffer(ptr, n)
		require.NoError(t, s.FromHost(ctx, buf, src))
		got := make([]byte, n)
		require.NoError(t, s.ToHost(ctx, got, buf))
		require.Equal(t, src, got, "n=%d", n)
		if n <= len(pinned) {
			copy(pinned, src)
			require.NoError(t, s.FromHost(ctx, buf, pinned[:n]))
			require.NoError(t, s.ToHost(ctx, pinned[:n], buf))
			require.Equal(t, src, pinned[:n])
		}
		require.NoError(t, dev.Free(ptr))
	}
	err = s.ToHost(ctx, make([]byte, 8), transport.HostBuffer(make([]byte, 8)))
	require.ErrorIs(t, err, transport.ErrInvalid)
	ptr, err := dev.Malloc(4)
	require.NoError(t, err)
	defer dev.Free(ptr)
	err = s.FromHost(ctx, dev.Buffer(ptr, 4), make([]byte, 5))
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.True(t, strings.Contains(err.Error(), "4 bytes"))
}

// TestPinnedPool: pinned blocks are reused by size class instead of being allocated
// and freed per call, a released block's memory is not handed out twice at once, the
// fast path still recognises pooled memory as pinned, and a pool past maxPooled frees.
func TestPinnedPool(t *testing.T) {
	p, log := useFakes(t, false)
	rt, err := cuda.Load(p["cuda.lib"])
	require.NoError(t, err)
	s := NewStager(rt)
	allocs := func() int { return len(calls(t, log, "cudaHostAlloc")) }
	a, freeA, err := s.PinnedAlloc(1000)
	require.NoError(t, err)
	require.Len(t, a, 1000)
	b, freeB, err := s.PinnedAlloc(minPinned) // same class, while a is in use: a new block
	require.NoError(t, err)
	require.NotEqual(t, addrOf(a), addrOf(b))
	require.Equal(t, 2, allocs())
	freeA()
	freeA() // twice: once only
	c, freeC, err := s.PinnedAlloc(7)
	require.NoError(t, err)
	require.Equal(t, addrOf(a), addrOf(c), "the released block comes back")
	_, ok := s.pinnedPtr(c)
	require.True(t, ok)
	d, freeD, err := s.PinnedAlloc(7) // a's block is taken again: another new one
	require.NoError(t, err)
	require.NotEqual(t, addrOf(c), addrOf(d))
	require.Equal(t, 3, allocs())
	big, freeBig, err := s.PinnedAlloc(minPinned + 1)
	require.NoError(t, err)
	require.Len(t, big, minPinned+1)
	require.Equal(t, 4, allocs(), "the next class up")
	for _, f := range []func(){freeB, freeC, freeD, freeBig} {
		f()
	}
	require.Equal(t, 3*minPinned+2*minPinned, s.pooled)
	require.Empty(t, calls(t, log, "cudaFreeHost"))
	s.pooled = maxPooled // full: the next release frees
	e, freeE, err := s.PinnedAlloc(3 * minPinned)
	require.NoError(t, err)
	freeE()
	require.Len(t, calls(t, log, "cudaFreeHost"), 1)
	_, ok = s.pinnedPtr(e)
	require.False(t, ok, "freed memory is no longer taken for pinned")
	_, _, err = s.PinnedAlloc(-1)
	require.ErrorIs(t, err, transport.ErrInvalid)
}

// TestHostIDReachesNCCL: ranks that pose as hosts of their own (a host identity other
// than the hostname) make NCCL see that identity as NCCL_HOSTID at init, so NCCL splits
// hosts as goccl does; the machine's own hostname leaves NCCL's default alone, and an
// NCCL_HOSTID the user set wins.
func TestHostIDReachesNCCL(t *testing.T) {
	hostname, err := os.Hostname()
	require.NoError(t, err)
	for _, tc := range []struct{ name, host, user, want string }{
		{"posing", "gpu-host-b", "", "gpu-host-b"},
		{"hostname", hostname, "", "-"},
		{"user's", "gpu-host-b", "site-7", "site-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, log := useFakes(t, false)
			t.Setenv("NCCL_HOSTID", tc.user)
			store := rendezvous.NewMemStore()
			t.Cleanup(func() { store.Close() })
			ep, err := Transport{}.Open(context.Background(), transporttest.Local(transporttest.CommID("hostid"), 0, 1, store,
				transporttest.Options{Params: p, Timeout: 20 * time.Second, Host: func(int) string { return tc.host }}))
			require.NoError(t, err)
			t.Cleanup(func() { ep.Close() })
			require.NoError(t, ep.(*endpoint).Offload(context.Background(), &transport.Collective{Kind: transport.KindBarrier}))
			inits := calls(t, log, "ncclCommInitRankConfig")
			require.Len(t, inits, 1)
			require.True(t, strings.HasSuffix(inits[0], " hostid="+tc.want), inits[0])
		})
	}
}

// TestInPlaceAllToAll: an in-place AllToAll (send and recv one buffer) gives the right
// blocks, with device and with host buffers, and NCCL never gets aliased buffers for it
// (on an H200, NCCL's in-place AllToAll corrupted data from 8 MiB at 2 ranks: it
// receives block p while still sending it). Counts 1, odd and 100003.
func TestInPlaceAllToAll(t *testing.T) {
	p, log := useFakes(t, false)
	const w = 2
	eps := openAll(t, w, p)
	dt := transport.Float32
	for _, count := range []int{1, 7, 100003} {
		for _, onDevice := range []bool{true, false} {
			n := w * count * dt.Size()
			bufs := make([][]byte, w)
			for r := range w {
				bufs[r] = make([]byte, n)
				for i := 0; i < w*count; i++ {
					put(dt, bufs[r], i, input(r, i))
				}
			}
			before := len(calls(t, log, "ncclAlltoAll"))
			errs := onAll(w, func(r int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				c := &transport.Collective{Kind: transport.KindAllToAll, Count: count, DType: dt}
				if !onDevice {
					c.Send, c.Recv = transport.HostBuffer(bufs[r]), transport.HostBuffer(bufs[r])
					return eps[r].Offload(ctx, c)
				}
				dev := eps[r].dev
				ptr, err := dev.Malloc(n)
				if err != nil {
					return err
				}
				defer dev.Free(ptr)
				if err := dev.CopyHtoD(ptr, bufs[r]); err != nil {
					return err
				}
				c.Send, c.Recv = dev.Buffer(ptr, n), dev.Buffer(ptr, n)
				if err := eps[r].Offload(ctx, c); err != nil {
					return err
				}
				return dev.CopyDtoH(bufs[r], ptr)
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for r := range w {
				for i := 0; i < w*count; i++ {
					require.Equal(t, input(i/count, r*count+i%count), le(dt, bufs[r], i), "count %d device %v rank %d element %d", count, onDevice, r, i)
				}
			}
			a2a := calls(t, log, "ncclAlltoAll")
			require.Len(t, a2a, before+w)
			for _, l := range a2a[before:] {
				var send, recv string
				for _, f := range strings.Fields(l) {
					if v, ok := strings.CutPrefix(f, "send="); ok {
						send = v
					}
					if v, ok := strings.CutPrefix(f, "recv="); ok {
						recv = v
					}
				}
				require.NotEmpty(t, send, l)
				require.NotEqual(t, send, recv, "NCCL got aliased AllToAll buffers: %s", l)
			}
		}
	}
}

// TestLinkStagingIsFixed: a link's staging memory (header plus one p2pChunk per
// direction) is allocated once, at set-up, and messages of any size pass through it in
// chunks, both directions at once: growing it on demand called cudaFree while the
// other direction's receive was running, which hung both ranks on a real GPU. Sizes 0,
// 1, a chunk less one, a chunk, and two chunks and an odd tail.
func TestLinkStagingIsFixed(t *testing.T) {
	for _, mode := range []string{"device", "pinned"} {
		t.Run(mode, func(t *testing.T) {
			p, log := useFakes(t, false)
			p["nccl.p2p_buffer"] = mode
			conns := transporttest.Mesh(t, Transport{}, 2, transporttest.Options{Params: p, Timeout: 20 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for seq, n := range []int{0, 1, p2pChunk - 1, p2pChunk, 2*p2pChunk + 7} {
				h := transport.Header{Seq: uint64(seq + 1), Tag: uint32(n)}
				msg := func(r int) []byte {
					b := make([]byte, n)
					for i := range b {
						b[i] = byte(i*7 + r*31 + n)
					}
					return b
				}
				errs := onAll(4, func(i int) error {
					r := i / 2
					c := conns[r][1-r]
					if i%2 == 0 {
						return c.Send(ctx, h, msg(r))
					}
					got := make([]byte, n)
					if err := c.Recv(ctx, h, got); err != nil {
						return err
					}
					if !bytes.Equal(got, msg(1-r)) {
						return fmt.Errorf("rank %d: %d bytes from rank %d differ", r, n, 1-r)
					}
					return nil
				})
				for _, err := range errs {
					require.NoError(t, err, "n=%d", n)
				}
			}
			alloc := "cudaMalloc"
			if mode == "pinned" {
				alloc = "cudaHostAlloc"
			}
			stage := 0
			for _, l := range calls(t, log, alloc) {
				if strings.Contains(l, fmt.Sprintf(" n=%d", transport.FrameHeaderSize+p2pChunk)) {
					stage++
				}
			}
			require.Equal(t, 4, stage, "one staging buffer per direction and rank")
			require.Empty(t, calls(t, log, "cudaFree"), "nothing freed before Close")
			require.Empty(t, calls(t, log, "cudaFreeHost"), "nothing freed before Close")
		})
	}
}
