package tcp

import (
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
}

// newSpinReader wraps c; with spin <= 0, or for a socket that has no raw descriptor,
// it returns c itself.
func newSpinReader(c net.Conn, spin time.Duration) io.Reader {
	sc, ok := c.(syscall.Conn)
	if spin <= 0 || !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &spinReader{conn: c, rc: rc, spin: spin}
}

// Read polls until some bytes are there, then returns them; once spin is over it lets
// the netpoller wait, which also enforces the read deadline that cancellation sets.
func (s *spinReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var (
		n      int
		rerr   error
		start  time.Time
		polled bool
	)
	err := s.rc.Read(func(fd uintptr) bool {
		for i := 0; ; i++ {
			n, rerr = syscall.Read(int(fd), p)
			switch {
			case rerr == syscall.EINTR:
				continue
			case rerr != syscall.EAGAIN:
				return true
			case polled:
				return false // woken by the poller for nothing: wait again
			}
			if i == 0 {
				start = time.Now()
			} else if time.Since(start) > s.spin {
				polled = true
				return false
			}
			// No runtime.Gosched: it wakes an idle P of our own runtime every time,
			// which costs more than the poll (see BENCHMARKS.md, "Speed").
			yield()
		}
	})
	if err != nil {
		return 0, err // closed, or the deadline that cancellation set
	}
	switch {
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: s.conn.LocalAddr(), Addr: s.conn.RemoteAddr(), Err: rerr}
	case n == 0:
		return 0, io.EOF
	case n < 0:
		return 0, errors.New("tcp: read returned a negative count")
	}
	return n, nil
}
