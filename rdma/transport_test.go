package rdma

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// TestOpenVerbsNotSupportedHere: without an RDMA device (this machine's kernel has no
// RDMA), the default provider reports ErrNotSupported with the reason, so a communicator
// configured with "auto" falls back.
func TestOpenVerbsNotSupportedHere(t *testing.T) {
	if devs, _ := Discover(); len(devs) > 0 {
		t.Skip("this host has RDMA devices")
	}
	for _, prov := range []string{"auto", "verbs"} {
		_, err := Transport{}.Open(context.Background(), local(0, 2, rendezvous.NewMemStore(), transport.Params{ParamProvider: prov}))
		require.ErrorIs(t, err, transport.ErrNotSupported, prov)
		require.Contains(t, err.Error(), "rdma: verbs:", prov)
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	st := rendezvous.NewMemStore()
	_, err := Transport{}.Open(context.Background(), local(0, 2, st, transport.Params{ParamProvider: "fast"}))
	require.ErrorIs(t, err, transport.ErrInvalid)
	_, err = Transport{}.Open(context.Background(), local(0, 2, nil, softParams()))
	require.ErrorIs(t, err, transport.ErrInvalid)
	_, err = Transport{}.Open(context.Background(), local(0, 2, st, softParams(ParamHCA, "^soft")))
	require.ErrorIs(t, err, transport.ErrNotSupported)
}

func TestCanConnect(t *testing.T) {
	st := rendezvous.NewMemStore()
	a, err := Transport{}.Open(context.Background(), local(0, 2, st, softParams()))
	require.NoError(t, err)
	defer a.Close()
	other := handle{Provider: "soft", Host: "host-b", Pid: 1, Port: rc.PortInfo{Device: "soft0", LinkLayer: "Software"}}
	err = a.CanConnect(transport.PeerInfo{Rank: 1, Host: "host-b", Handle: other.encode()})
	require.ErrorIs(t, err, transport.ErrNotSupported)
	require.Contains(t, err.Error(), "one host")
	other.Host, other.Provider = "host-a", "verbs"
	require.ErrorIs(t, a.CanConnect(transport.PeerInfo{Rank: 1, Handle: other.encode()}), transport.ErrNotSupported)
	require.ErrorIs(t, a.CanConnect(transport.PeerInfo{Rank: 1, Handle: []byte{9, 9}}), transport.ErrProtocol)
	require.ErrorIs(t, a.CanConnect(transport.PeerInfo{Rank: 0, Handle: a.Handle()}), transport.ErrInvalid)
}

// connectBoth runs Connect on two endpoints opened with different settings and returns
// both errors.
func connectBoth(t *testing.T, la, lb transport.Local) (error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var eps [2]transport.Endpoint
	for i, l := range []transport.Local{la, lb} {
		ep, err := Transport{}.Open(ctx, l)
		require.NoError(t, err)
		defer ep.Close()
		eps[i] = ep
	}
	var errs [2]error
	var wg sync.WaitGroup
	for i := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := eps[i].Connect(ctx, transport.PeerInfo{Rank: 1 - i, Host: "host-a", Handle: eps[1-i].Handle()})
			if c != nil {
				c.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errs[0], errs[1]
}

func TestConnectWrongTokenIsAuthError(t *testing.T) {
	st := rendezvous.NewMemStore()
	la, lb := local(0, 2, st, softParams()), local(1, 2, st, softParams())
	la.AuthToken, lb.AuthToken = []byte("right"), []byte("wrong")
	ea, eb := connectBoth(t, la, lb)
	require.ErrorIs(t, ea, transport.ErrAuth)
	require.ErrorIs(t, eb, transport.ErrAuth)
	require.Contains(t, ea.Error(), "rank 1")
}

func TestConnectSettingsDiffer(t *testing.T) {
	st := rendezvous.NewMemStore()
	ea, eb := connectBoth(t, local(0, 2, st, softParams()), local(1, 2, st, softParams(ParamCredits, "8")))
	for _, err := range []error{ea, eb} {
		require.ErrorIs(t, err, transport.ErrInvalid)
		require.Contains(t, err.Error(), "rdma.credits differs")
	}
}

func TestConnectInfoRoundTrip(t *testing.T) {
	ci := connInfo{Provider: "soft", Rank: 3, Peer: 5, Credits: 8, Chunk: 4096, FifoAddr: 1 << 40, FifoKey: 77, RingAddr: 99, RingKey: 78,
		TX: []rc.Addr{{QPN: 1, PSN: 0xabcdef, LID: 4, MTU: 5, GID: [16]byte{1, 2}, Extra: []byte{1, 2, 3}}},
		RX: []rc.Addr{{QPN: 2}}}
	ci.Nonce[3] = 9
	b := ci.encode()
	got, err := decodeInfo(b)
	require.NoError(t, err)
	require.Equal(t, &ci, got)
	for i := range b {
		_, err := decodeInfo(b[:i])
		require.ErrorIs(t, err, transport.ErrProtocol, "truncated at %d", i)
	}
	_, err = decodeInfo(append(b, 0))
	require.ErrorIs(t, err, transport.ErrProtocol)
}

func FuzzDecodeInfo(f *testing.F) {
	ci := connInfo{Provider: "verbs", TX: []rc.Addr{{}}, RX: []rc.Addr{{}}}
	f.Add(ci.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeInfo(b)
		if err == nil {
			require.Equal(t, b, got.encode())
		}
	})
}

func TestImmAndWRID(t *testing.T) {
	for _, k := range []int{immData, immCTS, immClose} {
		for _, s := range []int{0, 1, 1023, immSlot} {
			gk, gs := splitImm(makeImm(k, s))
			require.Equal(t, [2]int{k, s}, [2]int{gk, gs})
		}
	}
	require.Equal(t, wrCTS, wrKind(wrID(wrCTS, 1<<50)))
}

type fakeMem struct{ b []byte }

func (m fakeMem) Bytes() []byte { return m.b }
func (m fakeMem) Free() error   { return nil }

type countingDev struct {
	rc.Device
	regs, closes int
}

type fakeMR struct {
	rc.MR
	d *countingDev
}

func (m *fakeMR) Close() error { m.d.closes++; return nil }

func (d *countingDev) Register(rc.Memory, rc.Access) (rc.MR, error) {
	d.regs++
	return &fakeMR{d: d}, nil
}

func TestMRCacheByRange(t *testing.T) {
	d := &countingDev{}
	c := newMRCache(d)
	big := make([]byte, 1<<16)
	whole, err := c.register(fakeMem{big}, rc.AccessLocalWrite|rc.AccessRemoteWrite)
	require.NoError(t, err)
	inner, err := c.register(fakeMem{big[4096:8192]}, rc.AccessLocalWrite)
	require.NoError(t, err)
	require.Equal(t, 1, d.regs, "a range inside a registered region with fewer rights reuses it")
	require.Equal(t, whole, inner)
	_, err = c.register(fakeMem{big[8192:]}, rc.AccessRemoteRead)
	require.NoError(t, err)
	require.Equal(t, 2, d.regs, "more rights need a new registration")
	_, err = c.register(fakeMem{make([]byte, 10)}, rc.AccessLocalWrite)
	require.NoError(t, err)
	require.Equal(t, 3, d.regs, "a range outside needs a new registration")
	require.NoError(t, c.release(whole))
	require.Equal(t, 0, d.closes, "still referenced")
	require.NoError(t, c.release(inner))
	require.Equal(t, 1, d.closes)
	require.ErrorIs(t, c.release(whole), transport.ErrInvalid)
}
