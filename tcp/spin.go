package tcp

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// spinReader reads a socket by polling it for up to spin before it parks on the
// netpoller. Parking costs a wake-up when the data comes (the poller thread, then the
// goroutine's thread: 25-50 µs each in these VMs, far more than a small message's
// flight over loopback), so a rank that expects an answer soon polls instead. Between
// polls it yields the CPU (sched_yield), so a peer process or another rank that needs
// this core gets it at once; see BENCHMARKS.md, "Speed" for what each variant measured.
type spinReader struct {
	conn net.Conn
	rc   syscall.RawConn
	spin time.Duration
	// park, set by the receiver around a striped message, skips the spin: its header
	// leads a MiB or more whose transfer dwarfs a wake-up, and a rank waiting for it
	// is usually waiting on a peer that is busy computing, so spinning only burns the
	// CPU that peer needs.
	park bool
	// ctx, set by the receiver for a small message, makes the context cost nothing
	// when the message is already there or comes during the spin: the spin checks ctx
	// itself, and the owner's watch is armed (once) only before parking.
	ctx   context.Context
	armed bool
	owner *conn

	// One Read's state, kept here with the callback bound once, so Read allocates nothing.
	fn     func(fd uintptr) bool
	p      []byte
	n      int
	rerr   error
	start  time.Time
	polled bool
	stop   error // the context ended, or arming its watch failed
}

// newSpinReader wraps c; with spin <= 0, or for a socket that has no raw descriptor,
// it returns nil, and the caller reads c itself.
func newSpinReader(c net.Conn, spin time.Duration) *spinReader {
	sc, ok := c.(syscall.Conn)
	if spin <= 0 || !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &spinReader{conn: c, rc: rc, spin: spin}
	s.fn = s.poll
	return s
}

// Read polls until some bytes are there, then returns them; once spin is over it lets
// the netpoller wait, which also enforces the read deadline that cancellation sets.
func (s *spinReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.p, s.n, s.rerr, s.polled, s.stop = p, 0, nil, false, nil
	err := s.rc.Read(s.fn)
	s.p = nil
	n, rerr, stop := s.n, s.rerr, s.stop
	switch {
	case err != nil:
		return 0, err // closed, or the deadline that cancellation set
	case stop != nil:
		return 0, stop
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: s.conn.LocalAddr(), Addr: s.conn.RemoteAddr(), Err: rerr}
	case n == 0:
		return 0, io.EOF
	case n < 0:
		return 0, errors.New("tcp: read returned a negative count")
	}
	return n, nil
}

// poll is Read's callback for the netpoller: true when done, false to wait for data.
func (s *spinReader) poll(fd uintptr) bool {
	for i := 0; ; i++ {
		s.n, s.rerr = rawRead(int(fd), s.p)
		switch {
		case s.rerr == syscall.EINTR:
			continue
		case s.rerr != syscall.EAGAIN:
			return true
		case s.polled || s.park:
			return s.parking() // woken by the poller for nothing, or not spinning: wait
		}
		if s.ctx != nil {
			if s.ctx.Err() != nil {
				s.stop = ctxErr(s.ctx)
				return true
			}
		}
		if i == 0 {
			s.start = time.Now()
		} else if time.Since(s.start) > s.spin {
			s.polled = true
			return s.parking()
		}
		// No runtime.Gosched: it wakes an idle P of our own runtime every time,
		// which costs more than the poll (see BENCHMARKS.md, "Speed").
		yield()
	}
}

// parking arms the receive's context watch, once, before the first park; it reports
// true (stop now) when the context has already ended.
func (s *spinReader) parking() bool {
	if s.ctx == nil || s.armed {
		return false
	}
	s.armed = true
	w := &s.owner.rw
	w.stop, w.fired, s.stop = s.owner.watch(s.ctx, false)
	return s.stop != nil
}
