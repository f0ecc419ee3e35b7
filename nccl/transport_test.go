package nccl

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
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
