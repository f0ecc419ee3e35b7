package shm_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/shm"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// linkPair opens two shm endpoints with the given tokens and connects them.
func linkPair(t *testing.T, tokens [2]string) ([2]transport.Conn, [2]error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	store := rendezvous.NewMemStore()
	comm := "authtest-" + t.Name() + time.Now().Format("150405.000000")
	var eps [2]transport.Endpoint
	for r := range 2 {
		ep, err := shm.Transport{}.Open(ctx, transport.Local{CommID: comm, Rank: r, World: 2, Host: "h",
			Store: rendezvous.WithPrefix(store, "shm"), Timeout: 5 * time.Second, AuthToken: []byte(tokens[r]),
			Params: transport.Params{}})
		require.NoError(t, err)
		eps[r] = ep
		t.Cleanup(func() { ep.Close() })
	}
	var conns [2]transport.Conn
	var errs [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			p := 1 - r
			conns[r], errs[r] = eps[r].Connect(ctx, transport.PeerInfo{Rank: p, Host: "h", Pid: os.Getpid(), Handle: eps[p].Handle()})
			if errs[r] != nil {
				return
			}
			// A first message each way: the creator checks the opener's proof before it.
			h := transport.Header{Seq: 1, Fp: transport.Fingerprint{Kind: transport.KindSendRecv, DType: transport.Uint8, Root: -1}}
			sendErr := make(chan error, 1)
			go func() { sendErr <- conns[r].Send(ctx, h, []byte{byte(r)}) }()
			buf := make([]byte, 1)
			errs[r] = errors.Join(conns[r].Recv(ctx, h, buf), <-sendErr)
			if errs[r] == nil && buf[0] != byte(p) {
				errs[r] = errors.New("wrong byte")
			}
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	return conns, errs
}

func TestAuthToken(t *testing.T) {
	_, errs := linkPair(t, [2]string{"s3cret", "s3cret"})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])

	for _, tc := range []struct {
		name   string
		tokens [2]string
	}{
		{"wrong", [2]string{"s3cret", "guess"}},
		{"creator has none", [2]string{"", "s3cret"}},
		{"opener has none", [2]string{"s3cret", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := linkPair(t, tc.tokens)
			require.Error(t, errors.Join(errs[0], errs[1]))
			require.True(t, errors.Is(errs[0], transport.ErrAuth) || errors.Is(errs[1], transport.ErrAuth),
				"one side must say ErrAuth: %v / %v", errs[0], errs[1])
			require.NotContains(t, errors.Join(errs[0], errs[1]).Error(), "s3cret")
		})
	}
}
