package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
	"github.com/goccl/goccl/transport/transporttest"
)

// syncBuf is a log sink safe for the endpoint's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// openRank opens rank r of a world of w for communicator comm with the given token.
func openRank(t *testing.T, comm string, r, w int, token string, params transport.Params, log io.Writer) transport.Endpoint {
	t.Helper()
	if params == nil {
		params = transport.Params{ParamAddr: "127.0.0.1:0"}
	}
	if log == nil {
		log = io.Discard
	}
	ep, err := Transport{}.Open(context.Background(), transport.Local{
		CommID: comm, Rank: r, World: w, Host: "localhost", Store: rendezvous.NewMemStore(),
		Timeout: 10 * time.Second, AuthToken: []byte(token), Params: params,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ep.Close() })
	return ep
}

func info(r int, ep transport.Endpoint) transport.PeerInfo {
	return transport.PeerInfo{Rank: r, Host: "localhost", Handle: ep.Handle()}
}

func TestAuth(t *testing.T) {
	const secret = "s3cret-token-value"
	for _, tc := range []struct {
		name         string
		dialer, lstn string
		ok           bool
	}{
		{"both", secret, secret, true},
		{"dialer without token", "", secret, false},
		{"listener without token", secret, "", false},
		{"wrong token", "other-token-value", secret, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comm := transporttest.CommID("auth")
			var logs syncBuf
			e0 := openRank(t, comm, 0, 2, tc.dialer, nil, &logs)
			e1 := openRank(t, comm, 1, 2, tc.lstn, nil, &logs)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var c1 transport.Conn
			var err1 error
			done := make(chan struct{})
			go func() {
				defer close(done)
				c1, err1 = e1.Connect(ctx, info(0, e0))
			}()
			c0, err0 := e0.Connect(ctx, info(1, e1))
			if tc.ok {
				require.NoError(t, err0)
				<-done
				require.NoError(t, err1)
				require.NoError(t, transporttest.SendRecv(ctx, c0, c1, transporttest.Header(0, 5, 0), []byte("hello")))
				_ = c0.Close()
				_ = c1.Close()
				return
			}
			require.ErrorIs(t, err0, transport.ErrAuth)
			cancel() // the listener side waits for a dialer that will never pass
			<-done
			require.Error(t, err1)
			for _, err := range []error{err0, err1} {
				require.NotContains(t, err.Error(), secret, "the token leaked into an error")
			}
			require.NotContains(t, logs.String(), secret, "the token leaked into a log")
			require.Eventually(t, func() bool { return strings.Contains(logs.String(), "refused") }, 10*time.Second, 10*time.Millisecond,
				"the listener did not log the refusal")
		})
	}
}

// recorder keeps everything written through it.
type recorder struct {
	net.Conn
	w bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.w.Write(p)
	return r.Conn.Write(p)
}

// TestReplay records a legitimate authenticated handshake and replays it byte for byte
// on a new socket: the listener's fresh nonce makes the old MAC worthless.
func TestReplay(t *testing.T) {
	const secret = "replay-secret"
	comm := transporttest.CommID("replay")
	var logs syncBuf
	e1 := openRank(t, comm, 1, 2, secret, nil, &logs)
	addr := string(e1.Handle())

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	rec := &recorder{Conn: c}
	h := hello{Comm: comm, From: 0, To: 1, World: 2, Index: 0, Count: 2, StripeMin: 256 << 10}
	rank, err := dialHandshake(rec, []byte(secret), h)
	require.NoError(t, err, "the genuine handshake must pass")
	require.Equal(t, uint32(1), rank)

	r, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = r.Write(rec.w.Bytes())
	require.NoError(t, err)
	_, err = expect(r, msgChallenge) // a fresh challenge, which the replay cannot answer
	require.NoError(t, err)
	_, err = expect(r, msgAccept)
	require.ErrorIs(t, err, transport.ErrAuth, "the replayed handshake was not refused")
	require.Contains(t, err.Error(), "replayed")
	require.Eventually(t, func() bool { return bytes.Contains([]byte(logs.String()), []byte("refused")) }, 10*time.Second, 10*time.Millisecond)
	require.NotContains(t, logs.String(), secret)
}

// TestStrangers sends garbage, truncated, oversized and wrong-communicator handshakes;
// each is refused or dropped, and the endpoint then links its real peer normally.
func TestStrangers(t *testing.T) {
	comm := transporttest.CommID("strangers")
	params := transport.Params{ParamAddr: "127.0.0.1:0", ParamHandshakeTimeout: "300ms"}
	e1 := openRank(t, comm, 1, 3, "", params, nil)
	addr := string(e1.Handle())
	wrong := func(h hello) []byte {
		im := initMsg{Version: hsVersion}
		var b bytes.Buffer
		_ = writeMsg(&b, msgInit, im.encode())
		_ = writeMsg(&b, msgHello, h.encode())
		return b.Bytes()
	}
	good := hello{Comm: comm, From: 0, To: 1, World: 3, Index: 0, Count: 1, StripeMin: 256 << 10}
	withComm, withWorld, withTo, withFrom, withCount := good, good, good, good, good
	withComm.Comm = "another-job"
	withWorld.World = 4
	withTo.To = 2
	withFrom.From = 2
	withCount.Count = 0
	oversized := []byte{msgInit, 0xff, 0xff}
	badVersion := binary.LittleEndian.AppendUint32([]byte{msgInit, 7, 0}, hsMagic)
	badVersion = append(badVersion, 9, 0, 0)
	for _, tc := range []struct {
		name string
		data []byte
		code byte // 0: just dropped
	}{
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 0},
		{"random", transporttest.Pattern(200, 1), 0},
		{"truncated", []byte{msgInit, 7}, 0},
		{"oversized", oversized, 0},
		{"silent", nil, 0},
		{"version", badVersion, rejectProtocol},
		{"communicator", wrong(withComm), rejectPeer},
		{"world", wrong(withWorld), rejectPeer},
		{"to", wrong(withTo), rejectPeer},
		{"from higher", wrong(withFrom), rejectPeer},
		{"no sockets", wrong(withCount), rejectProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = c.Write(tc.data)
			require.NoError(t, err)
			typ, body, err := readMsg(c)
			if tc.code == 0 {
				if err == nil {
					require.Equal(t, byte(msgReject), typ, "a stranger got %d", typ)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, byte(msgReject), typ)
			code, reason, err := decodeReject(body)
			require.NoError(t, err)
			require.Equal(t, tc.code, code, "reason: %s", reason)
			_, err = c.Read(make([]byte, 1))
			require.Error(t, err, "the listener must drop a refused socket")
		})
	}
	// The endpoint still serves its real peer.
	e0 := openRank(t, comm, 0, 3, "", params, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		c   transport.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := e1.Connect(ctx, info(0, e0)); ch <- res{c, err} }()
	c0, err := e0.Connect(ctx, info(1, e1))
	require.NoError(t, err)
	defer c0.Close()
	r := <-ch
	require.NoError(t, r.err)
	defer r.c.Close()
	require.NoError(t, transporttest.SendRecv(ctx, c0, r.c, transporttest.Header(1, 3, 0), []byte("abc")))
}
