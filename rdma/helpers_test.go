package rdma

import (
	"context"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// softParams configures the software provider with small slots so tests exercise
// chunking and credit exhaustion with small messages.
func softParams(extra ...string) transport.Params {
	p := transport.Params{ParamProvider: "soft", ParamChunkBytes: "4096", ParamCredits: "4"}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i]] = extra[i+1]
	}
	return p
}

func local(rank, world int, st transport.Store, p transport.Params) transport.Local {
	return transport.Local{CommID: "test-comm", Rank: rank, World: world, Host: "host-a", Store: st,
		Timeout: 20 * time.Second, Params: p}
}

// pair opens two endpoints in this process and connects them; both links are closed
// when the test ends.
func pair(t *testing.T, p transport.Params) (a, b transport.Conn) {
	t.Helper()
	st := rendezvous.NewMemStore()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var eps [2]transport.Endpoint
	for r := range eps {
		ep, err := Transport{}.Open(ctx, local(r, 2, st, p))
		require.NoError(t, err)
		eps[r] = ep
		t.Cleanup(func() { ep.Close() })
	}
	var conns [2]transport.Conn
	var errs [2]error
	var wg sync.WaitGroup
	for r := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			peer := 1 - r
			conns[r], errs[r] = eps[r].Connect(ctx, transport.PeerInfo{Rank: peer, Host: "host-a", Handle: eps[peer].Handle()})
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	for _, c := range conns {
		t.Cleanup(func() { c.Close() })
	}
	return conns[0], conns[1]
}

func hdr(seq uint64, n int) transport.Header {
	return transport.Header{Seq: seq, Fp: transport.Fingerprint{Kind: transport.KindAllReduce, DType: transport.Uint8, Count: uint64(n), Root: -1}, Tag: 7}
}

func pattern(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func sizes(chunk int) []int {
	return []int{0, 1, 7, chunk - 40, chunk - 39, chunk, 3*chunk + 5, 100003, 1 << 20}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
