package rendezvous

import (
	"bufio"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/goccl/goccl/transport"
)

// ServerOptions configures a TCPStoreServer.
type ServerOptions struct {
	// AuthToken, when non-empty, makes every client prove it holds the same token.
	AuthToken []byte
	// Logger receives refusals and protocol errors (never the token); nil discards.
	Logger *slog.Logger
	// MaxConns bounds open client connections (default 4096); more are closed at once.
	MaxConns int
	// HandshakeTimeout bounds a client's greeting (default 10 s).
	HandshakeTimeout time.Duration
}

// TCPStoreServer serves a key-value store to TCPStore clients until Close: rank 0 of
// a job (torchrun's MASTER_ADDR:MASTER_PORT), `goccl run`, or `goccl store --listen`.
type TCPStoreServer struct {
	ln   net.Listener
	opt  ServerOptions
	log  *slog.Logger
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	data    map[string][]byte
	changed chan struct{} // closed and replaced on every write
	conns   map[net.Conn]struct{}
	closed  bool
}

// NewTCPStoreServer listens on addr ("host:port"; port 0 picks one) and serves.
func NewTCPStoreServer(addr string, opt ServerOptions) (*TCPStoreServer, error) {
	if opt.MaxConns <= 0 {
		opt.MaxConns = 4096
	}
	if opt.HandshakeTimeout <= 0 {
		opt.HandshakeTimeout = 10 * time.Second
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: serve store on %s: %w", addr, err)
	}
	s := &TCPStoreServer{
		ln: ln, opt: opt, log: log, done: make(chan struct{}),
		data: map[string][]byte{}, changed: make(chan struct{}), conns: map[net.Conn]struct{}{},
	}
	s.wg.Go(s.acceptLoop)
	return s, nil
}

// Addr is the address the server listens on ("127.0.0.1:29500").
func (s *TCPStoreServer) Addr() string { return s.ln.Addr().String() }

// Close stops the server; waiting clients get an error, and no goroutine outlives it.
func (s *TCPStoreServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("rendezvous: close store server: %w", err)
	}
	return nil
}

func (s *TCPStoreServer) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			case <-time.After(backoff): // EMFILE and friends: back off, do not spin
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.mu.Lock()
		if s.closed || len(s.conns) >= s.opt.MaxConns {
			s.mu.Unlock()
			s.log.Warn("rendezvous: store refused a connection: too many clients", "remote", c.RemoteAddr().String(), "max", s.opt.MaxConns)
			_ = c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				_ = c.Close()
			}()
			if err := s.serve(c); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("rendezvous: store dropped a client", "remote", c.RemoteAddr().String(), "err", err)
			}
		})
	}
}

// greet runs the server's side of the greeting.
func (s *TCPStoreServer) greet(c net.Conn, br *bufio.Reader) error {
	_ = c.SetDeadline(time.Now().Add(s.opt.HandshakeTimeout))
	defer c.SetDeadline(time.Time{})
	auth := len(s.opt.AuthToken) > 0
	ns := make([]byte, nonceLen)
	var flags byte
	if auth {
		ns, flags = freshNonce(), flagAuth
	}
	if _, err := c.Write(greeting(flags, ns)); err != nil {
		return err
	}
	var b [greetReply]byte
	if _, err := io.ReadFull(br, b[:]); err != nil {
		return fmt.Errorf("greeting: %w", unexpected(err))
	}
	refuse := func(reason string, sentinel error) error {
		msg := binary.LittleEndian.AppendUint16(append([]byte{greetRefused}, make([]byte, macLen)...), uint16(len(reason)))
		_, _ = c.Write(append(msg, reason...))
		return fmt.Errorf("%w: %s", sentinel, reason)
	}
	cflags, nc, err := parseGreeting(b[:])
	if err != nil {
		return refuse(err.Error(), transport.ErrProtocol)
	}
	switch {
	case auth && cflags&flagAuth == 0:
		return refuse("authentication required: the store has an auth token and the client sent none", transport.ErrAuth)
	case !auth && cflags&flagAuth != 0:
		return refuse("the client uses an auth token but the store has none", transport.ErrAuth)
	case auth && !hmac.Equal(b[greetLen:], storeMAC(s.opt.AuthToken, "client", ns, nc)):
		return refuse("wrong auth token (or a replayed greeting)", transport.ErrAuth)
	}
	reply := append([]byte{greetOK}, make([]byte, macLen)...)
	if auth {
		copy(reply[1:], storeMAC(s.opt.AuthToken, "server", nc, ns))
	}
	_, err = c.Write(binary.LittleEndian.AppendUint16(reply, 0))
	return err
}

// serve answers one client's requests until it leaves or misbehaves.
func (s *TCPStoreServer) serve(c net.Conn) error {
	br := bufio.NewReaderSize(c, 64<<10)
	if err := s.greet(c, br); err != nil {
		return err
	}
	for {
		req, err := readRequest(br)
		if err != nil {
			if errors.Is(err, transport.ErrProtocol) {
				_, _ = c.Write(encodeResponse(stProtocol, []byte(err.Error())))
			}
			return err
		}
		if br.Buffered() > 0 {
			// Requests are strictly one at a time; pipelining is a protocol violation.
			_, _ = c.Write(encodeResponse(stProtocol, []byte("request sent before the previous response")))
			return fmt.Errorf("%w: pipelined request", transport.ErrProtocol)
		}
		status, payload := s.handle(c, req)
		if status == stClosed && payload == nil {
			return nil // the client left while waiting
		}
		if _, err := c.Write(encodeResponse(status, payload)); err != nil {
			return err
		}
	}
}

func (s *TCPStoreServer) handle(c net.Conn, req request) (byte, []byte) {
	switch req.op {
	case opSet:
		s.write(func() { s.data[req.key] = req.value })
		return stOK, nil
	case opDelete:
		s.write(func() { delete(s.data, req.key) })
		return stOK, nil
	case opAdd:
		delta := int64(binary.LittleEndian.Uint64(req.value))
		var sum int64
		var bad []byte
		s.write(func() {
			if v, ok := s.data[req.key]; ok {
				n, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					bad = []byte(fmt.Sprintf("add %q: the value is not an integer", req.key))
					return
				}
				sum = n
			}
			sum += delta
			s.data[req.key] = []byte(strconv.FormatInt(sum, 10))
		})
		if bad != nil {
			return stInvalid, bad
		}
		return stOK, binary.LittleEndian.AppendUint64(nil, uint64(sum))
	}
	return s.get(c, req.key, time.Duration(binary.LittleEndian.Uint64(req.value))*time.Millisecond)
}

func (s *TCPStoreServer) write(f func()) {
	s.mu.Lock()
	f()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// get waits for key up to limit (0 = no limit). While it waits, a watcher reads the
// socket: a client that gives up (its ctx ended) closes it, which ends the wait, so a
// departed client never pins a goroutine.
func (s *TCPStoreServer) get(c net.Conn, key string, limit time.Duration) (byte, []byte) {
	var gone chan error
	defer func() {
		if gone != nil {
			_ = c.SetReadDeadline(time.Unix(1, 0))
			<-gone
			_ = c.SetReadDeadline(time.Time{})
		}
	}()
	var timeout <-chan time.Time
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		timeout = t.C
	}
	for {
		s.mu.Lock()
		v, ok := s.data[key]
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return stOK, v
		}
		if gone == nil {
			gone = make(chan error, 1)
			go func() {
				var b [1]byte
				_, err := c.Read(b[:])
				if err == nil {
					err = fmt.Errorf("%w: data sent while waiting", transport.ErrProtocol)
					_ = c.Close()
				}
				gone <- err
			}()
		}
		select {
		case <-ch:
		case <-timeout:
			return stTimeout, []byte(fmt.Sprintf("key %q not set within %v", key, limit))
		case <-s.done:
			return stClosed, []byte("store server closing")
		case err := <-gone:
			gone <- err // for the deferred drain
			return stClosed, nil
		}
	}
}
