//go:build linux

package shm

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
	"github.com/goccl/goccl/transport/transporttest"
)

// pair opens two endpoints of a fresh communicator in this process and links them.
func pair(t *testing.T, params transport.Params) (a, b *conn, comm string) {
	t.Helper()
	comm = transporttest.CommID("unit")
	eps, infos := openN(t, comm, 2, params)
	conns, err := transporttest.Connect(context.Background(), eps, infos, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conns[0][1].Close(); _ = conns[1][0].Close() })
	return conns[0][1].(*conn), conns[1][0].(*conn), comm
}

func openN(t testing.TB, comm string, n int, params transport.Params) ([]transport.Endpoint, []transport.PeerInfo) {
	t.Helper()
	store := rendezvous.NewMemStore()
	eps := make([]transport.Endpoint, n)
	infos := make([]transport.PeerInfo, n)
	for r := range n {
		ep, err := Transport{}.Open(context.Background(), transport.Local{
			CommID: comm, Rank: r, World: n, Host: "h", Store: rendezvous.WithPrefix(store, comm),
			Timeout: 10 * time.Second, Params: params,
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ep.Close() })
		eps[r] = ep
		infos[r] = transport.PeerInfo{Rank: r, Host: "h", Pid: os.Getpid(), Handle: ep.Handle()}
	}
	return eps, infos
}

// leftovers lists the segment names of comm still in /dev/shm.
func leftovers(t testing.TB, comm string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(defaultDir, segPrefix(comm)+"*"))
	require.NoError(t, err)
	return m
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		params  transport.Params
		want    func(Options) bool
		wantErr string
	}{
		{transport.Params{}, func(o Options) bool {
			return o.Dir == "/dev/shm" && o.RingBytes == defaultRingBytes && o.SingleCopy == SingleCopyAuto && o.Spin == defaultSpin
		}, ""},
		{transport.Params{"shm.ring_bytes": "1M", "shm.chunk_bytes": "32KiB"}, func(o Options) bool {
			return o.RingBytes == 1<<20 && o.ChunkBytes == 32<<10
		}, ""},
		{transport.Params{"shm.single_copy": "false", "tcp.sockets": "4"}, func(o Options) bool { return o.SingleCopy == SingleCopyOff }, ""},
		{transport.Params{"shm.single_copy": "TRUE", "shm.single_copy_min": "0"}, func(o Options) bool {
			return o.SingleCopy == SingleCopyOn && o.SingleCopyMin == 1
		}, ""},
		{transport.Params{"shm.spin": "0s"}, func(o Options) bool { return o.Spin == 0 }, ""},
		{transport.Params{"local_world_size": "4"}, func(o Options) bool { return o.LocalRanks == 4 }, ""},
		{transport.Params{"local_world_size": "4", "shm.local_ranks": "2"}, func(o Options) bool { return o.LocalRanks == 2 }, ""},
		{transport.Params{"shm.staged_min": "off", "shm.staging_bytes": "2M"}, func(o Options) bool {
			return o.StagedMin == -1 && o.StagingBytes == 2<<20
		}, ""},
		{transport.Params{"shm.staged_min": "0"}, func(o Options) bool { return o.StagedMin == 1 && o.StagingBytes == 0 }, ""},
		{transport.Params{"shm.staged_min": "big"}, nil, "4M, 0 (every size) or off"},
		{transport.Params{"shm.staged_max": "16M"}, func(o Options) bool { return o.StagedMax == 16<<20 && o.StagedMin == 0 }, ""},
		{transport.Params{"shm.staged_max": "none"}, func(o Options) bool { return o.StagedMax == math.MaxInt }, ""},
		{transport.Params{"shm.staged_max": "0"}, func(o Options) bool { return o.StagedMax == math.MaxInt }, ""},
		{transport.Params{"shm.staged_max": "-4K"}, nil, "16M, or 0 or none (no bound)"},
		{transport.Params{"shm.staging_bytes": "1K"}, nil, "between 4096 and 1073741824 bytes"},
		{transport.Params{"shm.ring_bytes": "3M"}, nil, "power of two"},
		{transport.Params{"shm.ring_bytes": "lots"}, nil, "byte count"},
		{transport.Params{"shm.chunk_bytes": "100"}, nil, "multiple of 64"},
		{transport.Params{"shm.ring_bytes": "64K", "shm.chunk_bytes": "64K"}, nil, "shm.ring_bytes/2"},
		{transport.Params{"shm.single_copy": "maybe"}, nil, "auto, true or false"},
		{transport.Params{"shm.stream_stores": "on"}, func(o Options) bool { return o.StreamStores == SwitchOn }, ""},
		{transport.Params{"shm.stream_stores": "False"}, func(o Options) bool { return o.StreamStores == SwitchOff }, ""},
		{transport.Params{"shm.stream_stores": "auto"}, func(o Options) bool { return o.StreamStores == SwitchAuto }, ""},
		{transport.Params{"shm.stream_stores": "fast"}, nil, "shm.stream_stores=\"fast\": want auto, true or false"},
		{transport.Params{"shm.spin": "-1s"}, nil, "duration between"},
		{transport.Params{"shm.dir": "relative"}, nil, "absolute"},
		{transport.Params{"shm.rings": "2"}, nil, `unknown parameter "shm.rings" (valid: shm.dir`},
	} {
		t.Run(fmt.Sprint(tc.params), func(t *testing.T) {
			o, err := ParseOptions(tc.params)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, transport.ErrInvalid)
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.True(t, tc.want(o), "%+v", o)
		})
	}
}

// TestStreams: on and off are what they say; auto streams while the local ranks (the
// configured count, else the links + 1) do not outnumber the CPUs, and for goroutine
// ranks of one process not GOMAXPROCS either.
func TestStreams(t *testing.T) {
	cpus := runtime.NumCPU()
	for _, tc := range []struct {
		o       Options
		links   int
		samePid bool
		want    bool
	}{
		{Options{StreamStores: SwitchOn, LocalRanks: cpus + 1}, 1, false, true},
		{Options{StreamStores: SwitchOff, LocalRanks: 1}, 1, false, false},
		{Options{LocalRanks: cpus}, 1, false, true},
		{Options{LocalRanks: cpus + 1}, 1, false, false},
		{Options{}, cpus - 1, false, true},
		{Options{}, cpus, false, false},
		{Options{LocalRanks: min(cpus, runtime.GOMAXPROCS(0))}, 1, true, true},
		{Options{LocalRanks: min(cpus, runtime.GOMAXPROCS(0)) + 1}, 1, true, false},
	} {
		require.Equal(t, tc.want, tc.o.Streams(tc.links, tc.samePid), "%+v, %d links, same process %v", tc.o, tc.links, tc.samePid)
	}
}

// TestStagingDefaults: 8 MiB parts up to 4 ranks, 32 MiB over the ranks beyond, never
// below 2 MiB; the staged thresholds by world size.
func TestStagingDefaults(t *testing.T) {
	for w, want := range map[int]int{1: 8 << 20, 2: 8 << 20, 4: 8 << 20, 8: 4 << 20, 16: 2 << 20, 1024: 2 << 20} {
		require.Equal(t, want, StagingBytesFor(w), "world %d", w)
	}
	for w, want := range map[int]int{2: 128 << 10, 3: 256 << 10, 4: 256 << 10, 8: 256 << 10} {
		require.Equal(t, want, StagedMinFor(w, false), "world %d", w)
		if w == 2 {
			want = math.MaxInt // streaming links: the ring at every size
		}
		require.Equal(t, want, StagedMinFor(w, true), "world %d, streaming", w)
	}
	// AllGather and ReduceScatter: from 4 MiB at 3 ranks, from 512 KiB at 4 and more,
	// and at 2, unless the links stream, from 8 MiB; never alone or empty.
	for _, tc := range []struct {
		world, bytes int
		want         bool
	}{
		{2, 0, false}, {2, 1, false}, {2, 64 << 10, false}, {2, 4 << 20, false},
		{2, 8<<20 - 1, false}, {2, 8 << 20, true}, {2, 1 << 30, true},
		{3, 0, false}, {3, 1, false}, {3, 4<<20 - 1, false}, {3, 4 << 20, true}, {3, 1 << 30, true},
		{4, 1, false}, {4, 128<<10 - 1, false}, {4, 128 << 10, true}, {8, 96 << 10, false}, {8, 1 << 30, true},
		{1, 1 << 20, false}, {1, 1 << 30, false},
	} {
		require.Equal(t, tc.want, StagedGatherFor(tc.world, tc.bytes, false), "world %d, %d bytes", tc.world, tc.bytes)
		require.Equal(t, tc.want && tc.world > 2, StagedGatherFor(tc.world, tc.bytes, true),
			"world %d, %d bytes, streaming", tc.world, tc.bytes)
	}
	for w, want := range map[int]int{2: 16 << 20, 3: 8 << 20, 4: 8 << 20} {
		require.Equal(t, want, StagedBroadcastMinFor(w, false), "world %d", w)
		if w == 2 {
			want = math.MaxInt
		}
		require.Equal(t, want, StagedBroadcastMinFor(w, true), "world %d, streaming", w)
	}
}

func TestCanConnect(t *testing.T) {
	me := handle{Magic: handleMagic, Version: handleVersion, Pid: 10, UID: 0, Machine: "m"}
	with := func(f func(*handle)) []byte { h := me; h.Pid = 11; f(&h); return h.encode() }
	same := with(func(*handle) {})
	for _, tc := range []struct {
		name     string
		selfHost string
		peer     transport.PeerInfo
		wantErr  string
	}{
		{"same host", "h", transport.PeerInfo{Rank: 1, Host: "h", Handle: same}, ""},
		{"other host", "h", transport.PeerInfo{Rank: 1, Host: "g", Handle: same}, `rank 1 is on host "g" and rank 0 on "h"`},
		{"no host", "", transport.PeerInfo{Rank: 1, Host: "", Handle: same}, "no host identity"},
		{"garbage handle", "h", transport.PeerInfo{Rank: 1, Host: "h", Handle: []byte("\x00junk")}, "not an shm handle"},
		{"tcp handle", "h", transport.PeerInfo{Rank: 1, Host: "h", Handle: []byte(`{"addr":"1.2.3.4:5"}`)}, "not an shm handle"},
		{"new version", "h", transport.PeerInfo{Rank: 1, Host: "h", Handle: with(func(h *handle) { h.Version = 9 })}, "version 9"},
		{"other user", "h", transport.PeerInfo{Rank: 1, Host: "h", Handle: with(func(h *handle) { h.UID = 1000 })}, "uid 1000"},
		{"other container", "h", transport.PeerInfo{Rank: 1, Host: "h", Handle: with(func(h *handle) { h.Machine = "n" })}, "not the kernel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := canConnect(0, tc.selfHost, me, tc.peer)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// modes are the data paths every transfer test runs over: the ring with payloads
// copied in through the cache and with non-temporal stores, and single-copy.
var modes = []struct {
	name   string
	params transport.Params
}{
	{"ring", transport.Params{"shm.single_copy": "false", "shm.stream_stores": "false", "shm.ring_bytes": "64K", "shm.chunk_bytes": "4K"}},
	{"ring/streamed", transport.Params{"shm.single_copy": "false", "shm.stream_stores": "true", "shm.ring_bytes": "64K", "shm.chunk_bytes": "4K"}},
	{"singlecopy", transport.Params{"shm.single_copy": "true", "shm.single_copy_min": "17", "shm.ring_bytes": "64K", "shm.chunk_bytes": "4K"}},
}

// TestSizes sends sizes around every boundary of the record, chunk and ring layout,
// both ways at once, through Recv and through RecvStream.
func TestSizes(t *testing.T) {
	sizes := []int{0, 1, 15, 16, 17, 63, 64, 65, shortMax - 1, shortMax, shortMax + 1, 4095, 4096, 4097, 3 * 4099, 64<<10 - 1, 64 << 10, 64<<10 + 1, 1<<20 + 3, 5<<20 + 11}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			a, b, _ := pair(t, m.params)
			ctx := ctxT(t)
			for i, n := range sizes {
				h := transporttest.Header(uint64(i), n, 7)
				pa, pb := transporttest.Pattern(n, uint64(2*i)), transporttest.Pattern(n, uint64(2*i+1))
				var wg sync.WaitGroup
				var sendA, sendB error
				wg.Go(func() { sendA = a.Send(ctx, h, pa) })
				wg.Go(func() { sendB = b.Send(ctx, h, pb) })
				gotB := make([]byte, n)
				require.NoError(t, b.Recv(ctx, h, gotB), "size %d", n)
				gotA := make([]byte, n)
				seen := make([]int, n)
				require.NoError(t, a.RecvStream(ctx, h, n, func(off int, p []byte) error {
					if off%recordBytes != 0 {
						return fmt.Errorf("piece at offset %d is not 64-byte aligned", off)
					}
					for k := range p {
						seen[off+k]++
					}
					copy(gotA[off:], p)
					return nil
				}), "size %d", n)
				wg.Wait()
				require.NoError(t, sendA)
				require.NoError(t, sendB)
				require.Empty(t, transporttest.Diff(gotB, pa), "size %d a->b", n)
				require.Empty(t, transporttest.Diff(gotA, pb), "size %d b->a", n)
				for k, s := range seen {
					if s != 1 {
						require.Failf(t, "bad stream", "size %d: byte %d delivered %d times", n, k, s)
					}
				}
			}
		})
	}
}

// TestSingleCopyFallback plays a kernel that refuses process_vm_readv: auto mode must
// deliver through the ring and stop trying; true mode must fail on both sides.
func TestSingleCopyFallback(t *testing.T) {
	refuse := func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error) { return 0, unix.EPERM }
	n := 300<<10 + 5
	t.Run("auto", func(t *testing.T) {
		a, b, _ := pair(t, transport.Params{"shm.single_copy_min": "1K"})
		b.readv = refuse // only the receiver reads; set before any transfer
		ctx := ctxT(t)
		for i := range 3 {
			h := transporttest.Header(uint64(i), n, 0)
			want := transporttest.Pattern(n, uint64(i))
			errc := make(chan error, 1)
			go func() { errc <- a.Send(ctx, h, want) }()
			got := make([]byte, n)
			require.NoError(t, b.Recv(ctx, h, got))
			require.NoError(t, <-errc)
			require.Empty(t, transporttest.Diff(got, want), "message %d", i)
			require.True(t, a.scOff, "the sender must stop trying single-copy after a refusal")
		}
	})
	t.Run("required", func(t *testing.T) {
		a, b, _ := pair(t, transport.Params{"shm.single_copy": "true", "shm.single_copy_min": "1K"})
		b.readv = refuse
		ctx := ctxT(t)
		h := transporttest.Header(0, n, 0)
		errc := make(chan error, 1)
		go func() { errc <- a.Send(ctx, h, make([]byte, n)) }()
		err := b.Recv(ctx, h, make([]byte, n))
		require.ErrorIs(t, err, transport.ErrNotSupported)
		require.ErrorContains(t, err, "shm.single_copy=true")
		require.ErrorIs(t, <-errc, transport.ErrNotSupported)
	})
}

// TestSingleCopySenderCancel: a sender that gives up while the receiver may be reading
// its buffer must make the receiver fail instead of delivering what it read.
func TestSingleCopySenderCancel(t *testing.T) {
	a, b, _ := pair(t, transport.Params{"shm.single_copy": "true", "shm.single_copy_min": "1K"})
	n := 1 << 20
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Send(ctx, transporttest.Header(0, n, 0), make([]byte, n)) }()
	// Wait until the descriptor is posted, then cancel before the receiver reads it.
	require.Eventually(t, func() bool { return atomic.LoadUint64(a.out.head) > 0 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	err := b.Recv(ctxT(t), transporttest.Header(0, n, 0), make([]byte, n))
	require.ErrorIs(t, err, transport.ErrPeer, "the receiver must not deliver a buffer its sender abandoned")
}

// TestSegmentsRemoved: names disappear as soon as both sides have mapped a segment; a
// segment whose peer never attached is removed by the creator's Close.
func TestSegmentsRemoved(t *testing.T) {
	t.Run("linked", func(t *testing.T) {
		_, _, comm := pair(t, nil)
		require.Empty(t, leftovers(t, comm))
	})
	t.Run("never attached", func(t *testing.T) {
		comm := transporttest.CommID("unit")
		eps, infos := openN(t, comm, 2, nil)
		c, err := eps[0].Connect(ctxT(t), infos[1])
		require.NoError(t, err)
		require.Len(t, leftovers(t, comm), 1, "the creator's segment waits for its peer")
		require.NoError(t, c.Close())
		require.Empty(t, leftovers(t, comm))
	})
	t.Run("RemoveSegments", func(t *testing.T) {
		comm := transporttest.CommID("unit")
		eps, infos := openN(t, comm, 3, nil)
		for _, p := range infos[1:] {
			c, err := eps[0].Connect(ctxT(t), p)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
		}
		require.Len(t, leftovers(t, comm), 2)
		n, err := RemoveSegments("", comm)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Empty(t, leftovers(t, comm))
	})
}

// TestHandshakeRejects: the attaching rank checks the header against the handle; a
// mismatch fails its Connect and the creator's next wait.
func TestHandshakeRejects(t *testing.T) {
	comm := transporttest.CommID("unit")
	eps, infos := openN(t, comm, 2, nil)
	c0, err := eps[0].Connect(ctxT(t), infos[1])
	require.NoError(t, err)
	defer c0.Close()
	h, err := decodeHandle(infos[0].Handle)
	require.NoError(t, err)
	h.Pid = deadPid(t) // not the process that created the segment
	wrong := infos[0]
	wrong.Handle = h.encode()
	_, err = eps[1].Connect(ctxT(t), wrong)
	require.ErrorIs(t, err, transport.ErrProtocol)
	require.ErrorContains(t, err, "created by pid")
	err = c0.Recv(ctxT(t), transporttest.Header(0, 1, 0), make([]byte, 1))
	require.ErrorIs(t, err, transport.ErrProtocol)
	require.ErrorContains(t, err, "rejected segment")
	require.Empty(t, leftovers(t, comm))
}

// TestCreatorGone: a rank waiting for a creator whose process has exited gives up with
// a PeerError instead of waiting for the whole timeout.
func TestCreatorGone(t *testing.T) {
	comm := transporttest.CommID("unit")
	eps, infos := openN(t, comm, 2, nil)
	h, err := decodeHandle(infos[0].Handle)
	require.NoError(t, err)
	h.Pid = deadPid(t)
	infos[0].Handle = h.encode()
	_, err = eps[1].Connect(ctxT(t), infos[0])
	var pe *transport.PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 0, pe.Peer)
	require.ErrorContains(t, err, "exited before it created the segment")
}

func TestConnectRejects(t *testing.T) {
	comm := transporttest.CommID("unit")
	eps, infos := openN(t, comm, 2, nil)
	for _, tc := range []struct {
		peer transport.PeerInfo
		is   error
		msg  string
	}{
		{infos[0], transport.ErrInvalid, "cannot link to rank 0"},
		{transport.PeerInfo{Rank: 5, Host: "h", Handle: infos[1].Handle}, transport.ErrInvalid, "want another rank in 0..1"},
		{transport.PeerInfo{Rank: 1, Host: "other", Handle: infos[1].Handle}, transport.ErrNotSupported, "needs one host"},
	} {
		_, err := eps[0].Connect(ctxT(t), tc.peer)
		require.ErrorIs(t, err, tc.is)
		require.ErrorContains(t, err, tc.msg)
	}
	require.Empty(t, leftovers(t, comm))
}

// TestDirFull: a segment that does not fit fails at Connect with a message that says
// how much room there is, not later with SIGBUS. It needs root to mount a tiny tmpfs.
func TestDirFull(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v); the check needs root", err)
	}
	defer unix.Unmount(dir, 0) //nolint:errcheck
	comm := transporttest.CommID("unit")
	eps, infos := openN(t, comm, 2, transport.Params{"shm.dir": dir, "shm.ring_bytes": "1M"})
	_, err := eps[0].Connect(ctxT(t), infos[1])
	require.ErrorIs(t, err, transport.ErrNotSupported)
	require.ErrorContains(t, err, "bytes free, the segment needs 2101248")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "a failed create must not leave its file")
}

func TestOpenErrors(t *testing.T) {
	store := rendezvous.NewMemStore()
	for _, tc := range []struct {
		l   transport.Local
		is  error
		msg string
	}{
		{transport.Local{Rank: 0, World: 1, Host: "h"}, transport.ErrInvalid, "no rendezvous store"},
		{transport.Local{Rank: 0, World: 1, Host: "h", Store: store, Params: transport.Params{"shm.dir": "/nonexistent/x"}},
			transport.ErrNotSupported, "segment directory /nonexistent/x"},
		{transport.Local{Rank: 2, World: 2, Store: store}, transport.ErrInvalid, "rank 2 outside a world of 2"},
	} {
		_, err := Transport{}.Open(context.Background(), tc.l)
		require.ErrorIs(t, err, tc.is)
		require.ErrorContains(t, err, tc.msg)
	}
}

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

func TestDescribe(t *testing.T) {
	a, _, comm := pair(t, nil)
	d := a.Describe()
	require.True(t, strings.HasPrefix(d, "shm rank 0 <-> rank 1"), d)
	require.Contains(t, d, segPrefix(comm))
	require.Contains(t, d, "single-copy auto")

}

// TestWindowNamesAreSwept: a window's name carries the communicator's segment prefix,
// so a launcher's RemoveSegments removes one a killed rank left behind.
func TestWindowNamesAreSwept(t *testing.T) {
	dir := t.TempDir()
	w, err := CreateWindow(dir, "sweep-me", 3, 1, 5000)
	require.NoError(t, err)
	defer w.Close()
	require.Len(t, w.Bytes(), 5000)
	r, err := OpenWindow(dir, "sweep-me", 3, 1, 5000)
	require.NoError(t, err)
	w.Bytes()[4999] = 7
	require.Equal(t, byte(7), r.Bytes()[4999], "the two mappings share memory")
	require.NoError(t, r.Close())
	_, err = OpenWindow(dir, "sweep-me", 3, 1, 9000)
	require.ErrorIs(t, err, transport.ErrProtocol, "a size the creator did not make")
	n, err := RemoveSegments(dir, "sweep-me")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = CreateWindow(dir, "sweep-me", 0, 0, 0)
	require.ErrorIs(t, err, transport.ErrInvalid)
}
