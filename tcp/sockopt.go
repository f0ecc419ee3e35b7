package tcp

import (
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/goccl/goccl/transport"
)

// setBuffers sets SO_SNDBUF and SO_RCVBUF before connect or listen (n == 0 keeps the
// kernel's auto-tuning). The kernel caps the value at net.core.[rw]mem_max.
func setBuffers(c syscall.RawConn, n int) error {
	if n <= 0 {
		return nil
	}
	var serr error
	err := c.Control(func(fd uintptr) {
		if e := syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, n); e != nil {
			serr = fmt.Errorf("tcp: SO_SNDBUF %d: %w", n, e)
			return
		}
		if e := syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n); e != nil {
			serr = fmt.Errorf("tcp: SO_RCVBUF %d: %w", n, e)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// tune sets what every link socket needs: no Nagle delay (a collective's small
// messages are latency-bound), and keepalive probes, so a peer host that vanishes
// without a FIN or RST still becomes an error (after about 15 + 3*5 s). An accepted
// socket from another host gets the system's congestion control back under "auto"
// (the listener chose one for links within the host; see listenCongestion).
func tune(c net.Conn, congestion string) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	if (congestion == CongestionAuto || congestion == "") && !sameHost(tc) {
		if def := systemCongestion(); def != "" {
			if rc, err := tc.SyscallConn(); err == nil {
				_ = setCongestion(rc, []string{def}) // best effort: the link works either way
			}
		}
	}
	if err := tc.SetNoDelay(true); err != nil {
		return fmt.Errorf("tcp: TCP_NODELAY: %w", err)
	}
	if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}); err != nil {
		return fmt.Errorf("tcp: keepalive: %w", err)
	}
	return nil
}

// The congestion control is chosen before listen and before connect, never after:
// the kernel initialises the default (BBR here) when the connection is established,
// and BBR marks the socket for pacing, which a later switch does not undo. Measured
// (.proposals/tcp-bench.md): a 64 MiB exchange each way over 2 sockets costs 82-86 ms
// of CPU with BBR, 64-68 switched after connect, 55-62 chosen before.

// autoCongestion is what CongestionAuto tries, in order, on a link within one host:
// cubic where the kernel lets this process pick it, else reno, which every kernel
// allows unprivileged processes.
var autoCongestion = []string{"cubic", "reno"}

// listenCongestion applies the congestion setting to the listening socket, whose
// accepted sockets inherit it. Under auto it takes cubic or reno for every link, and
// tune gives links from other hosts the system's default back.
func listenCongestion(c syscall.RawConn, want string) error {
	switch want {
	case CongestionSystem:
		return nil
	case CongestionAuto, "":
		_ = setCongestion(c, autoCongestion) // best effort
		return nil
	}
	return explicitCongestion(c, want)
}

// dialCongestion applies the congestion setting to a socket about to connect to addr.
// Under auto only a destination on this host gets cubic or reno.
func dialCongestion(c syscall.RawConn, want, addr string) error {
	switch want {
	case CongestionSystem:
		return nil
	case CongestionAuto, "":
		if isLocal(addr) {
			_ = setCongestion(c, autoCongestion)
		}
		return nil
	}
	return explicitCongestion(c, want)
}

func explicitCongestion(c syscall.RawConn, want string) error {
	if err := setCongestion(c, []string{want}); err != nil {
		return fmt.Errorf("tcp: %w: %s=%q: the kernel refused it (%v); this process may use: %s",
			transport.ErrInvalid, ParamCongestion, want, err, allowedCongestion())
	}
	return nil
}

// setCongestion sets the first of names the kernel accepts.
func setCongestion(c syscall.RawConn, names []string) error {
	var serr error
	for _, name := range names {
		if err := c.Control(func(fd uintptr) {
			serr = setCongestionFD(fd, name)
		}); err != nil {
			return err
		}
		if serr == nil {
			return nil
		}
	}
	return serr
}

// sameHost reports whether both ends of the socket are on this host, which is when the
// kernel routes it over loopback: a loopback address, or the same address at both ends.
func sameHost(tc *net.TCPConn) bool {
	l, ok1 := tc.LocalAddr().(*net.TCPAddr)
	r, ok2 := tc.RemoteAddr().(*net.TCPAddr)
	return ok1 && ok2 && (r.IP.IsLoopback() || r.IP.Equal(l.IP))
}

// isLocal reports whether addr ("ip:port") is an address of this host.
func isLocal(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

func systemCongestion() string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func allowedCongestion() string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
	if err != nil {
		return "(unknown: " + err.Error() + ")"
	}
	return strings.Join(strings.Fields(string(b)), ", ")
}
