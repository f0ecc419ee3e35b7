package rendezvous

import (
	"bufio"
	"context"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/goccl/goccl/transport"
)

// ClientOptions configures a TCPStore client.
type ClientOptions struct {
	// Timeout bounds reaching the store (retrying while it is not up yet); 0 means 30 s.
	// Each call is further bounded by its own context.
	Timeout time.Duration
	// AuthToken must match the server's; empty for a server without one.
	AuthToken []byte
	// Logger receives retries and fallbacks; nil discards.
	Logger *slog.Logger
}

// TCPStore is a transport.Store client of a TCPStoreServer. It is safe for concurrent
// use: each call borrows a connection from a small pool, so a Get waiting on the server
// never holds up a Set from another goroutine.
type TCPStore struct {
	addr   string
	opt    ClientOptions
	log    *slog.Logger
	server *TCPStoreServer // when this client also serves (ServeOrDial)

	mu     sync.Mutex
	idle   []*storeConn
	closed bool
}

type storeConn struct {
	c  net.Conn
	br *bufio.Reader
}

const maxIdle = 8

// DialTCPStore connects to the store at addr, retrying until opt.Timeout or ctx ends,
// because ranks usually start before (or while) the serving rank comes up.
func DialTCPStore(ctx context.Context, addr string, opt ClientOptions) (*TCPStore, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &TCPStore{addr: addr, opt: opt, log: log}
	sc, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	s.put(sc)
	return s, nil
}

// ServeOrDial is the torchrun convention in one call: when isServer (rank 0), serve
// the store on addr's port on every interface and connect to it; otherwise connect to
// addr. If the port is already served (by `goccl run` or `goccl store`), the would-be
// server connects to that one instead. Closing the returned store also stops a server
// it started.
func ServeOrDial(ctx context.Context, addr string, isServer bool, opt ClientOptions) (*TCPStore, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: %w: store address %q is not host:port", transport.ErrInvalid, addr)
	}
	var srv *TCPStoreServer
	if isServer {
		srv, err = NewTCPStoreServer(net.JoinHostPort("", port), ServerOptions{AuthToken: opt.AuthToken, Logger: opt.Logger})
		switch {
		case err == nil:
			_, p, _ := net.SplitHostPort(srv.Addr())
			addr = net.JoinHostPort(loopbackFor(host), p)
		case errors.Is(err, syscall.EADDRINUSE):
			if opt.Logger != nil {
				opt.Logger.Info("rendezvous: store port already served; connecting to it", "addr", addr)
			}
		default:
			return nil, err
		}
	}
	s, err := DialTCPStore(ctx, addr, opt)
	if err != nil {
		if srv != nil {
			_ = srv.Close()
		}
		return nil, err
	}
	s.server = srv
	return s, nil
}

// loopbackFor picks the loopback address matching the family of host.
func loopbackFor(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		return "::1"
	}
	return "127.0.0.1"
}

// Server returns the server this client started (ServeOrDial on rank 0), or nil.
func (s *TCPStore) Server() *TCPStoreServer { return s.server }

// Addr is the store's address.
func (s *TCPStore) Addr() string { return s.addr }

func (s *TCPStore) dial(ctx context.Context) (*storeConn, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	backoff := 20 * time.Millisecond
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err == nil {
			sc := &storeConn{c: c, br: bufio.NewReaderSize(c, 64<<10)}
			if err = s.greet(ctx, sc); err == nil {
				return sc, nil
			}
			_ = c.Close()
			if errors.Is(err, transport.ErrAuth) || errors.Is(err, transport.ErrProtocol) {
				return nil, fmt.Errorf("rendezvous: store at %s: %w", s.addr, err)
			}
		}
		s.log.Debug("rendezvous: store not reachable yet", "addr", s.addr, "err", err)
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, fmt.Errorf("rendezvous: connecting to store at %s: %w (last attempt: %v)", s.addr, ctx.Err(), err)
			}
			return nil, fmt.Errorf("rendezvous: store at %s unreachable after %v: %w: %w",
				s.addr, time.Since(start).Round(time.Millisecond), transport.ErrTimeout, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// greet runs the client's side of the greeting.
func (s *TCPStore) greet(ctx context.Context, sc *storeConn) error {
	dl := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = sc.c.SetDeadline(dl)
	defer sc.c.SetDeadline(time.Time{})
	var g [greetLen]byte
	if _, err := io.ReadFull(sc.br, g[:]); err != nil {
		return fmt.Errorf("greeting: %w", unexpected(err))
	}
	sflags, ns, err := parseGreeting(g[:])
	if err != nil {
		return err
	}
	auth := len(s.opt.AuthToken) > 0
	if sflags&flagAuth == 0 && auth {
		return fmt.Errorf("%w: the store has no auth token but this client has one", transport.ErrAuth)
	}
	nc := make([]byte, nonceLen)
	reply := greeting(0, nc)
	if auth {
		nc = freshNonce()
		reply = append(greeting(flagAuth, nc), storeMAC(s.opt.AuthToken, "client", ns, nc)...)
	} else {
		reply = append(reply, make([]byte, macLen)...)
	}
	if _, err := sc.c.Write(reply); err != nil {
		return err
	}
	var r [1 + macLen + 2]byte
	if _, err := io.ReadFull(sc.br, r[:]); err != nil {
		return fmt.Errorf("greeting: %w", unexpected(err))
	}
	if r[0] != greetOK {
		n := min(int(binary.LittleEndian.Uint16(r[1+macLen:])), maxMessage)
		msg := make([]byte, n)
		_, _ = io.ReadFull(sc.br, msg)
		if auth || sflags&flagAuth != 0 {
			return fmt.Errorf("%w: the store refused: %s", transport.ErrAuth, printable(msg))
		}
		return fmt.Errorf("%w: the store refused: %s", transport.ErrProtocol, printable(msg))
	}
	if auth && !hmac.Equal(r[1:1+macLen], storeMAC(s.opt.AuthToken, "server", nc, ns)) {
		return fmt.Errorf("%w: the store did not prove it holds the auth token", transport.ErrAuth)
	}
	return nil
}

func printable(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		out[i] = c
	}
	return string(out)
}

func (s *TCPStore) get(ctx context.Context) (*storeConn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, transport.ErrClosed
	}
	if n := len(s.idle); n > 0 {
		sc := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return sc, nil
	}
	s.mu.Unlock()
	return s.dial(ctx)
}

func (s *TCPStore) put(sc *storeConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.idle) >= maxIdle {
		_ = sc.c.Close()
		return
	}
	s.idle = append(s.idle, sc)
}

// do runs one request. ctx's end closes the connection under it (the server notices
// and stops waiting); the error then says which key and why.
func (s *TCPStore) do(ctx context.Context, what string, req request, limit int) (byte, []byte, error) {
	fail := func(err error) (byte, []byte, error) {
		return 0, nil, fmt.Errorf("rendezvous: %s at store %s: %w", what, s.addr, err)
	}
	if len(req.key) == 0 || len(req.key) > MaxKey {
		return fail(fmt.Errorf("%w: key of %d bytes (want 1..%d)", transport.ErrInvalid, len(req.key), MaxKey))
	}
	if len(req.value) > MaxValue {
		return fail(fmt.Errorf("%w: value of %d bytes exceeds %d", transport.ErrInvalid, len(req.value), MaxValue))
	}
	if err := ctx.Err(); err != nil {
		return fail(ctxErr(ctx))
	}
	sc, err := s.get(ctx)
	if err != nil {
		return fail(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = sc.c.SetDeadline(time.Unix(1, 0)) })
	_, err = sc.c.Write(req.encode())
	var status byte
	var p []byte
	if err == nil {
		status, p, err = readResponse(sc.br, limit)
	}
	if !stop() || err != nil {
		_ = sc.c.Close()
		if ctx.Err() != nil {
			return fail(ctxErr(ctx))
		}
		return fail(fmt.Errorf("%w: store connection lost: %w", transport.ErrPeer, err))
	}
	s.put(sc)
	switch status {
	case stOK:
		return status, p, nil
	case stTimeout:
		return fail(fmt.Errorf("%w: %s", transport.ErrTimeout, printable(p)))
	case stInvalid:
		return fail(fmt.Errorf("%w: %s", transport.ErrInvalid, printable(p)))
	case stClosed:
		return fail(fmt.Errorf("store server %w: %s", transport.ErrClosed, printable(p)))
	}
	return fail(fmt.Errorf("%w: %s", transport.ErrProtocol, printable(p)))
}

// Set implements transport.Store.
func (s *TCPStore) Set(ctx context.Context, key string, value []byte) error {
	_, _, err := s.do(ctx, fmt.Sprintf("set %q", key), request{op: opSet, key: key, value: value}, 0)
	return err
}

// Get implements transport.Store: the server holds the request until key exists, up
// to ctx's deadline.
func (s *TCPStore) Get(ctx context.Context, key string) ([]byte, error) {
	var ms uint64
	if d, ok := ctx.Deadline(); ok {
		ms = uint64(max(time.Until(d).Milliseconds(), 1))
	}
	_, v, err := s.do(ctx, fmt.Sprintf("waiting for key %q", key), request{op: opGet, key: key, value: binary.LittleEndian.AppendUint64(nil, ms)}, MaxValue)
	return v, err
}

// Add implements transport.Store.
func (s *TCPStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	_, v, err := s.do(ctx, fmt.Sprintf("add %q", key), request{op: opAdd, key: key, value: binary.LittleEndian.AppendUint64(nil, uint64(delta))}, 8)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("rendezvous: add %q at store %s: %w: %d-byte sum", key, s.addr, transport.ErrProtocol, len(v))
	}
	return int64(binary.LittleEndian.Uint64(v)), nil
}

// Delete implements transport.Store.
func (s *TCPStore) Delete(ctx context.Context, key string) error {
	_, _, err := s.do(ctx, fmt.Sprintf("delete %q", key), request{op: opDelete, key: key}, 0)
	return err
}

// Close releases the client's connections, and the server when this client started it.
func (s *TCPStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, sc := range idle {
		_ = sc.c.Close()
	}
	if s.server != nil {
		return s.server.Close()
	}
	return nil
}

// ctxErr turns a finished context into ErrTimeout (deadline) or its cause.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}

var _ transport.Store = (*TCPStore)(nil)
