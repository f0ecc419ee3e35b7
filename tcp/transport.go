package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	reuseport "github.com/libp2p/go-reuseport"

	"github.com/goccl/goccl/transport"
)

// Name is the registry name of this transport.
const Name = "tcp"

func init() { transport.Register(Transport{}) }

// Transport is the TCP transport. The zero value is ready to use; settings come from
// the tcp.* Params of transport.Local.
type Transport struct{}

// Name returns "tcp".
func (Transport) Name() string { return Name }

// ParamPrefixes: tcp reads the "tcp." keys (transport.ParamChecker).
func (Transport) ParamPrefixes() []string { return []string{Name + "."} }

// CheckParams reports what ParseOptions would refuse.
func (Transport) CheckParams(p transport.Params) error {
	_, err := ParseOptions(p)
	return err
}

// maxPendingHandshakes bounds the sockets handshaking at once, so a flood of strangers
// costs a bounded number of goroutines; sockets beyond it are closed at once.
const maxPendingHandshakes = 256

// Open listens for this rank's peers. The endpoint's Handle is the "ip:port" to dial.
func (Transport) Open(ctx context.Context, l transport.Local) (transport.Endpoint, error) {
	if l.World < 1 || l.Rank < 0 || l.Rank >= l.World {
		return nil, fmt.Errorf("tcp: %w: rank %d outside a world of %d (want 0 <= rank < world)", transport.ErrInvalid, l.Rank, l.World)
	}
	if len(l.CommID) > maxCommID {
		return nil, fmt.Errorf("tcp: %w: communicator id is %d bytes, limit %d", transport.ErrInvalid, len(l.CommID), maxCommID)
	}
	if l.World > 1<<20 {
		return nil, fmt.Errorf("tcp: %w: world of %d ranks exceeds %d", transport.ErrInvalid, l.World, 1<<20)
	}
	opt, err := ParseOptions(l.Params)
	if err != nil {
		return nil, err
	}
	log := l.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &endpoint{
		local: l, opt: opt, log: log.With("transport", Name),
		slots: map[int]*slot{}, done: make(chan struct{}),
		sem: make(chan struct{}, maxPendingHandshakes), hs: map[net.Conn]struct{}{},
	}
	addr := listenAddr(ctx, opt, l.Host)
	lc := net.ListenConfig{Control: e.control}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: rank %d: listen on %s: %w", l.Rank, addr, err)
	}
	e.ln = ln
	ta := ln.Addr().(*net.TCPAddr)
	ip := ta.IP
	if ip.IsUnspecified() {
		ip = advertiseIP()
	}
	e.handle = net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port))
	e.wg.Go(e.acceptLoop)
	e.log.Debug("tcp: listening", "addr", e.handle, "sockets", opt.Sockets)
	return e, nil
}

// control makes the listener reusable (go-reuseport: a restarted rank can bind its
// old port despite TIME_WAIT), and sets the congestion control and the buffers before
// listen, so accepted sockets inherit them (and a window scale that fits the buffers).
func (e *endpoint) control(network, address string, c syscall.RawConn) error {
	if err := reuseport.Control(network, address, c); err != nil {
		return err
	}
	if err := listenCongestion(c, e.opt.Congestion); err != nil {
		return err
	}
	return setBuffers(c, e.opt.BufSize)
}

type endpoint struct {
	local  transport.Local
	opt    Options
	log    *slog.Logger
	ln     net.Listener
	handle string

	mu     sync.Mutex
	slots  map[int]*slot // sockets dialed in by lower ranks, by rank
	hs     map[net.Conn]struct{}
	closed bool
	// lastRefusal is kept for the error of a Connect that times out waiting.
	lastRefusal string

	done chan struct{}
	sem  chan struct{}
	wg   sync.WaitGroup
}

// slot gathers the sockets a lower rank dials in, until its Connect claims them.
type slot struct {
	socks     []net.Conn
	filled    int
	stripeMin int
	ready     chan struct{} // closed when every socket is in
	claimed   bool
}

func (e *endpoint) Handle() []byte { return []byte(e.handle) }

// CanConnect accepts any peer with a well-formed address, except that a loopback
// address only reaches ranks on the same host. Both sides compute the same answer.
func (e *endpoint) CanConnect(p transport.PeerInfo) error {
	ip, _, err := parseHandle(p.Handle)
	if err != nil {
		return fmt.Errorf("tcp: rank %d: %w", p.Rank, err)
	}
	mine, _, _ := parseHandle([]byte(e.handle))
	if (ip.IsLoopback() || mine.IsLoopback()) && p.Host != e.local.Host {
		return fmt.Errorf("tcp: rank %d on host %q listens on %s and rank %d on host %q on %s: loopback does not cross hosts",
			p.Rank, p.Host, p.Handle, e.local.Rank, e.local.Host, e.handle)
	}
	return nil
}

func parseHandle(h []byte) (net.IP, int, error) {
	host, port, err := net.SplitHostPort(string(h))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: handle %q is not ip:port", transport.ErrInvalid, h)
	}
	ip := net.ParseIP(host)
	n, err := strconv.Atoi(port)
	if ip == nil || err != nil || n <= 0 || n > 65535 {
		return nil, 0, fmt.Errorf("%w: handle %q is not ip:port", transport.ErrInvalid, h)
	}
	return ip, n, nil
}

// Connect links to peer: the lower rank dials, the higher waits for its sockets.
func (e *endpoint) Connect(ctx context.Context, p transport.PeerInfo) (transport.Conn, error) {
	self := e.local.Rank
	if p.Rank == self {
		return nil, fmt.Errorf("tcp: %w: rank %d cannot link to itself", transport.ErrInvalid, self)
	}
	if p.Rank < 0 || p.Rank >= e.local.World {
		return nil, fmt.Errorf("tcp: %w: peer rank %d outside a world of %d", transport.ErrInvalid, p.Rank, e.local.World)
	}
	if err := e.CanConnect(p); err != nil {
		return nil, err
	}
	if e.local.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.local.Timeout)
		defer cancel()
	}
	if self < p.Rank {
		return e.dial(ctx, p)
	}
	return e.await(ctx, p)
}

func (e *endpoint) isClosed() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func (e *endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.done)
	err := e.ln.Close()
	for c := range e.hs {
		_ = c.Close()
	}
	for _, s := range e.slots {
		if !s.claimed {
			for _, c := range s.socks {
				if c != nil {
					_ = c.Close()
				}
			}
		}
	}
	e.mu.Unlock()
	e.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("tcp: close listener %s: %w", e.handle, err)
	}
	return nil
}

func (e *endpoint) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		c, err := e.ln.Accept()
		if err != nil {
			if e.isClosed() {
				return
			}
			// EMFILE and friends: wait instead of spinning, as net/http does.
			e.log.Warn("tcp: accept failed", "addr", e.handle, "err", err)
			select {
			case <-time.After(backoff):
			case <-e.done:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		select {
		case e.sem <- struct{}{}:
		default:
			e.log.Warn("tcp: too many handshakes in progress; dropping connection", "remote", c.RemoteAddr().String())
			_ = c.Close()
			continue
		}
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			_ = c.Close()
			<-e.sem
			return
		}
		e.hs[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Go(func() {
			defer func() { <-e.sem }()
			e.serve(c)
		})
	}
}

// serve handshakes one incoming socket and parks it in its rank's slot.
func (e *endpoint) serve(c net.Conn) {
	remote := c.RemoteAddr().String()
	_ = c.SetDeadline(time.Now().Add(e.opt.HandshakeTimeout))
	err := tune(c, e.opt.Congestion)
	var h hello
	if err == nil {
		h, err = listenHandshake(c, e.local.AuthToken, e.validate)
	}
	if err == nil {
		err = e.place(c, h)
	}
	e.mu.Lock()
	delete(e.hs, c)
	if err != nil {
		e.lastRefusal = fmt.Sprintf("from %s: %v", remote, err)
	}
	e.mu.Unlock()
	if err != nil {
		if !e.isClosed() {
			e.log.Warn("tcp: refused a link", "rank", e.local.Rank, "remote", remote, "err", err)
		}
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
}

func (e *endpoint) validate(h hello) *refusedError {
	l := e.local
	bad := func(f string, a ...any) *refusedError {
		return &refusedError{code: rejectPeer, reason: fmt.Sprintf(f, a...)}
	}
	switch {
	case h.Comm != l.CommID:
		return bad("wrong communicator: rank %d is not in the dialer's communicator", l.Rank)
	case h.World != uint32(l.World):
		return bad("wrong world: the dialer has %d ranks, rank %d has %d", h.World, l.Rank, l.World)
	case h.To != uint32(l.Rank):
		return bad("wrong rank: the dialer wants rank %d, this is rank %d", h.To, l.Rank)
	case h.From >= uint32(l.World) || h.From >= h.To:
		return bad("rank %d may not dial rank %d (the lower rank dials the higher, world %d)", h.From, h.To, l.World)
	case h.Count < 1 || h.Count > MaxSockets || h.Index >= h.Count:
		return &refusedError{code: rejectProtocol, reason: fmt.Sprintf("socket %d of %d (want 1..%d sockets)", h.Index, h.Count, MaxSockets)}
	case h.StripeMin < 4<<10 || h.StripeMin > 1<<30:
		return &refusedError{code: rejectProtocol, reason: fmt.Sprintf("stripe threshold %d outside [4096, 2^30]", h.StripeMin)}
	}
	return nil
}

// place puts a handshaken socket into its slot and sends the accept.
func (e *endpoint) place(c net.Conn, h hello) error {
	from := int(h.From)
	e.mu.Lock()
	s := e.slotLocked(from)
	var reason string
	switch {
	case e.closed:
		reason = "endpoint closed"
	case s.claimed:
		reason = fmt.Sprintf("rank %d is already linked", from)
	case s.socks == nil:
		s.socks = make([]net.Conn, h.Count)
		s.stripeMin = int(h.StripeMin)
	}
	if reason == "" && (len(s.socks) != int(h.Count) || s.stripeMin != int(h.StripeMin)) {
		reason = fmt.Sprintf("socket %d of rank %d says %d sockets, an earlier one said %d", h.Index, from, h.Count, len(s.socks))
	}
	if reason == "" && s.socks[h.Index] != nil {
		reason = fmt.Sprintf("socket %d of rank %d is already linked", h.Index, from)
	}
	if reason != "" {
		e.mu.Unlock()
		_ = writeMsg(c, msgReject, encodeReject(rejectBusy, reason))
		return &refusedError{code: rejectBusy, reason: reason}
	}
	s.socks[h.Index] = c
	s.filled++
	full := s.filled == len(s.socks)
	e.mu.Unlock()
	if err := writeMsg(c, msgAccept, binary.LittleEndian.AppendUint32(nil, uint32(e.local.Rank))); err != nil {
		// The socket stays in the slot; the link fails on first use and names the peer.
		e.log.Warn("tcp: sending accept failed", "rank", from, "err", err)
	}
	if full {
		close(s.ready)
	}
	return nil
}

func (e *endpoint) slotLocked(rank int) *slot {
	s, ok := e.slots[rank]
	if !ok {
		s = &slot{ready: make(chan struct{})}
		e.slots[rank] = s
	}
	return s
}

// await waits for a lower rank's sockets.
func (e *endpoint) await(ctx context.Context, p transport.PeerInfo) (transport.Conn, error) {
	e.mu.Lock()
	s := e.slotLocked(p.Rank)
	e.mu.Unlock()
	select {
	case <-s.ready:
	case <-e.done:
		return nil, fmt.Errorf("tcp: rank %d: waiting for rank %d: endpoint %w", e.local.Rank, p.Rank, transport.ErrClosed)
	case <-ctx.Done():
		e.mu.Lock()
		last := e.lastRefusal
		e.mu.Unlock()
		msg := ""
		if last != "" {
			msg = " (last refused handshake " + last + ")"
		}
		return nil, fmt.Errorf("tcp: rank %d at %s: waiting for rank %d (%s) to connect: %w%s",
			e.local.Rank, e.handle, p.Rank, p.Handle, ctxErr(ctx), msg)
	}
	e.mu.Lock()
	if s.claimed || e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("tcp: %w: rank %d already has a link to rank %d", transport.ErrInvalid, e.local.Rank, p.Rank)
	}
	s.claimed = true
	e.mu.Unlock()
	c, err := newConn(e.local.Rank, p, s.socks, s.stripeMin, e.opt.Spin)
	if err != nil {
		for _, sc := range s.socks {
			_ = sc.Close()
		}
		return nil, err
	}
	return c, nil
}

// dial opens the sockets to a higher rank, retrying refused connections (the peer may
// be about to listen again) until ctx ends.
func (e *endpoint) dial(ctx context.Context, p transport.PeerInfo) (transport.Conn, error) {
	n := e.opt.Sockets
	socks := make([]net.Conn, 0, n)
	fail := func(err error) (transport.Conn, error) {
		for _, c := range socks {
			_ = c.Close()
		}
		return nil, fmt.Errorf("tcp: rank %d dial rank %d at %s: %w", e.local.Rank, p.Rank, p.Handle, err)
	}
	d := net.Dialer{KeepAlive: -1, Control: func(_, addr string, c syscall.RawConn) error {
		if err := dialCongestion(c, e.opt.Congestion, addr); err != nil {
			return err
		}
		return setBuffers(c, e.opt.BufSize)
	}}
	for i := range n {
		h := hello{Comm: e.local.CommID, From: uint32(e.local.Rank), To: uint32(p.Rank), World: uint32(e.local.World),
			Index: uint16(i), Count: uint16(n), StripeMin: uint32(e.opt.StripeMin)}
		var c net.Conn
		var rank uint32
		var err error
		for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
			if c, err = e.dialOne(ctx, &d, string(p.Handle)); err != nil {
				return fail(err)
			}
			dl := time.Now().Add(e.opt.HandshakeTimeout)
			if d, ok := ctx.Deadline(); ok && d.Before(dl) {
				dl = d
			}
			_ = c.SetDeadline(dl)
			stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
			rank, err = dialHandshake(c, e.local.AuthToken, h)
			stop()
			// A listener whose handshake slots are all taken (a flood of idle strangers)
			// drops the socket before replying: try again until the context ends.
			if err == nil || ctx.Err() != nil || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
				break
			}
			_ = c.Close()
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			case <-e.done:
				return fail(fmt.Errorf("endpoint %w", transport.ErrClosed))
			}
		}
		socks = append(socks, c)
		if err != nil {
			if ctx.Err() != nil {
				err = ctxErr(ctx)
			}
			return fail(fmt.Errorf("handshake on socket %d: %w", i, err))
		}
		if int(rank) != p.Rank {
			return fail(fmt.Errorf("%w: the listener is rank %d, not %d", transport.ErrProtocol, rank, p.Rank))
		}
		_ = c.SetDeadline(time.Time{})
	}
	c, err := newConn(e.local.Rank, p, socks, e.opt.StripeMin, e.opt.Spin)
	if err != nil {
		return fail(err)
	}
	return c, nil
}

func (e *endpoint) dialOne(ctx context.Context, d *net.Dialer, addr string) (net.Conn, error) {
	backoff := 10 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			if err := tune(c, e.opt.Congestion); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (last attempt: %v)", ctxErr(ctx), err)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last attempt: %v)", ctxErr(ctx), err)
		case <-e.done:
			return nil, fmt.Errorf("endpoint %w", transport.ErrClosed)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// ctxErr turns a finished context into the error to return: ErrTimeout for a deadline
// (so errors.Is matches both it and context.DeadlineExceeded), the cause otherwise.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	if c := context.Cause(ctx); c != nil && c != ctx.Err() {
		return fmt.Errorf("%w: %w", ctx.Err(), c)
	}
	return ctx.Err()
}
