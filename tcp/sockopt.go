package tcp

import (
	"fmt"
	"net"
	"syscall"
	"time"
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
// messages are latency-bound) and keepalive probes, so a peer host that vanishes
// without a FIN or RST still becomes an error (after about 15 + 3*5 s).
func tune(c net.Conn) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	if err := tc.SetNoDelay(true); err != nil {
		return fmt.Errorf("tcp: TCP_NODELAY: %w", err)
	}
	if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}); err != nil {
		return fmt.Errorf("tcp: keepalive: %w", err)
	}
	return nil
}
