package rendezvous

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func serve(t *testing.T, token string, log io.Writer) *TCPStoreServer {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	srv, err := NewTCPStoreServer("127.0.0.1:0", ServerOptions{AuthToken: []byte(token), Logger: slog.New(slog.NewTextHandler(log, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestUnreachable: a store nobody serves is an error after the client's timeout.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = DialTCPStore(context.Background(), addr, ClientOptions{Timeout: 300 * time.Millisecond})
	require.ErrorIs(t, err, transport.ErrTimeout)
	require.Contains(t, err.Error(), "store at "+addr+" unreachable after")
}

// TestLateServer: clients that start before the server connect once it is up.
func TestLateServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	done := make(chan error, 1)
	go func() {
		s, err := DialTCPStore(timeout(t, 30*time.Second), addr, ClientOptions{})
		if err == nil {
			_, err = s.Get(timeout(t, 30*time.Second), "k")
			s.Close()
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	srv, err := NewTCPStoreServer(addr, ServerOptions{})
	require.NoError(t, err)
	defer srv.Close()
	c, err := DialTCPStore(timeout(t, 10*time.Second), addr, ClientOptions{})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Set(timeout(t, 10*time.Second), "k", []byte("v")))
	require.NoError(t, <-done)
}

func TestStoreAuth(t *testing.T) {
	const secret = "store-secret"
	for _, tc := range []struct {
		name, server, client string
		ok                   bool
	}{
		{"both", secret, secret, true},
		{"client without token", secret, "", false},
		{"server without token", "", secret, false},
		{"wrong token", secret, "nope", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuf
			srv := serve(t, tc.server, &logs)
			c, err := DialTCPStore(timeout(t, 10*time.Second), srv.Addr(), ClientOptions{Timeout: 5 * time.Second, AuthToken: []byte(tc.client)})
			if tc.ok {
				require.NoError(t, err)
				defer c.Close()
				require.NoError(t, c.Set(timeout(t, 10*time.Second), "k", []byte("v")))
				return
			}
			require.ErrorIs(t, err, transport.ErrAuth)
			require.NotContains(t, err.Error(), secret)
			require.Eventually(t, func() bool { return logs.String() != "" || tc.server == "" }, 5*time.Second, 10*time.Millisecond)
			require.NotContains(t, logs.String(), secret)
		})
	}
}

// TestStoreReplay replays a recorded authenticated greeting and request.
func TestStoreReplay(t *testing.T) {
	const secret = "replay"
	srv := serve(t, secret, nil)
	c, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	defer c.Close()
	var rec bytes.Buffer
	st := &TCPStore{addr: srv.Addr(), opt: ClientOptions{AuthToken: []byte(secret)}}
	sc := &storeConn{c: recordConn{c, &rec}, br: bufioReader(c)}
	require.NoError(t, st.greet(context.Background(), sc))
	req := request{op: opSet, key: "k", value: []byte("v")}
	_, err = sc.c.Write(req.encode())
	require.NoError(t, err)
	st0, _, err := readResponse(sc.br, 0)
	require.NoError(t, err)
	require.Equal(t, byte(stOK), st0)

	r, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = r.Write(rec.Bytes())
	require.NoError(t, err)
	all, _ := io.ReadAll(r) // greeting, refusal, then the server hangs up
	require.Greater(t, len(all), greetLen)
	require.Equal(t, byte(greetRefused), all[greetLen], "a replayed greeting was accepted")
	require.Contains(t, string(all), "wrong auth token")
}

type recordConn struct {
	net.Conn
	w *bytes.Buffer
}

func (r recordConn) Write(p []byte) (int, error) { r.w.Write(p); return r.Conn.Write(p) }

// TestGarbageClient: a client that sends garbage loses its connection; others go on.
func TestGarbageClient(t *testing.T) {
	srv := serve(t, "", nil)
	good, err := DialTCPStore(timeout(t, 10*time.Second), srv.Addr(), ClientOptions{})
	require.NoError(t, err)
	defer good.Close()
	waiting := make(chan error, 1)
	go func() {
		v, err := good.Get(timeout(t, 30*time.Second), "later")
		if err == nil && string(v) != "ok" {
			err = io.ErrUnexpectedEOF
		}
		waiting <- err
	}()
	hdr := func(op byte, kl uint16, vl uint32) []byte {
		b := []byte{protoVersion, op, 0, 0, 0, 0, 0, 0}
		binary.LittleEndian.PutUint16(b[2:], kl)
		binary.LittleEndian.PutUint32(b[4:], vl)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"http", []byte("GET / HTTP/1.1\r\n\r\n" + strings.Repeat("x", 100))},
		{"bad version", append([]byte{9, opSet, 1, 0, 1, 0, 0, 0}, 'k', 'v')},
		{"bad op", hdr(99, 1, 0)},
		{"empty key", hdr(opSet, 0, 0)},
		{"huge key", hdr(opSet, MaxKey+1, 0)},
		{"huge value", hdr(opSet, 1, MaxValue+1)},
		{"get without limit", hdr(opGet, 1, 0)},
		{"truncated", hdr(opSet, 10, 10)[:6]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Addr())
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
			br := bufioReader(c)
			var g [greetLen]byte
			_, err = io.ReadFull(br, g[:])
			require.NoError(t, err)
			if tc.name != "http" {
				_, err = c.Write(append(greeting(0, make([]byte, nonceLen)), make([]byte, macLen)...))
				require.NoError(t, err)
				var ok [1 + macLen + 2]byte
				_, err = io.ReadFull(br, ok[:])
				require.NoError(t, err)
				require.Equal(t, byte(greetOK), ok[0])
			}
			_, err = c.Write(tc.data)
			require.NoError(t, err)
			if tc.name == "truncated" {
				require.NoError(t, c.(*net.TCPConn).CloseWrite())
			}
			_, err = io.ReadAll(br) // the server answers (or not) and hangs up
			require.NoError(t, err)
		})
	}
	require.NoError(t, good.Set(timeout(t, 10*time.Second), "later", []byte("ok")))
	require.NoError(t, <-waiting, "a well-behaved client was disturbed")
}

// TestServeOrDial: rank 0 serves, the others dial; a second server on the same port
// falls back to the existing one; Close stops what it started, leaking nothing.
func TestServeOrDial(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := timeout(t, 30*time.Second)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	s0, err := ServeOrDial(ctx, addr, true, ClientOptions{})
	require.NoError(t, err)
	require.NotNil(t, s0.Server())
	s1, err := ServeOrDial(ctx, addr, false, ClientOptions{})
	require.NoError(t, err)
	again, err := ServeOrDial(ctx, addr, true, ClientOptions{})
	require.NoError(t, err, "a second would-be server must connect to the running one")
	require.Nil(t, again.Server())
	require.NoError(t, s0.Set(ctx, "x", []byte("1")))
	for _, s := range []*TCPStore{s1, again} {
		v, err := s.Get(ctx, "x")
		require.NoError(t, err)
		require.Equal(t, "1", string(v))
	}
	// A Get blocked on the server ends when the server closes.
	errc := make(chan error, 1)
	go func() { _, err := s1.Get(ctx, "never"); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, s0.Close())
	require.Error(t, <-errc)
	require.NoError(t, s1.Close())
	require.NoError(t, again.Close())
	_, err = ServeOrDial(ctx, "no-port", true, ClientOptions{})
	require.ErrorIs(t, err, transport.ErrInvalid)
	noLeaks(t, before)
}

// noLeaks waits for the goroutine count to fall back to before, else dumps them all.
func noLeaks(t *testing.T, before int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if runtime.NumGoroutine() <= before {
			return
		}
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("goroutines: %d before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
}

// TestOversizedClientValue is refused on the client, before any byte is sent.
func TestOversizedClientValue(t *testing.T) {
	srv := serve(t, "", nil)
	c, err := DialTCPStore(timeout(t, 10*time.Second), srv.Addr(), ClientOptions{})
	require.NoError(t, err)
	defer c.Close()
	err = c.Set(timeout(t, 10*time.Second), strings.Repeat("k", MaxKey+1), nil)
	require.ErrorIs(t, err, transport.ErrInvalid)
	err = c.Set(timeout(t, 10*time.Second), "", nil)
	require.ErrorIs(t, err, transport.ErrInvalid)
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, 64<<10) }
