package tcp

import "golang.org/x/sys/unix"

// setCongestionFD sets TCP_CONGESTION on a socket.
func setCongestionFD(fd uintptr, name string) error {
	return unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
}
