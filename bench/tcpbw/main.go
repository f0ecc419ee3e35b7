// Command tcpbw measures this machine's loopback TCP rate, the reference
// bench/headline.sh sets goccl's tcp AllReduce against, as membw is the shm one's.
//
//	go build -o bench/bin/tcpbw ./bench/tcpbw && bench/bin/tcpbw [-mib 64] [-sockets 2]
//
// Two endpoints in this process (on at least two threads) send each other -mib MiB at
// once over -sockets loopback connections: 1 MiB writes, one goroutine per socket and
// direction, a 30 s deadline per round, and the socket settings goccl's tcp links get
// within a host (cubic, else reno, chosen before listen and connect; tcp.bufsize's
// default for SO_SNDBUF and SO_RCVBUF; TCP_NODELAY).
// It prints the payload both directions moved per second together, in decimal GB/s,
// the best of five rounds, as "tcp2_gbs <value>".
//
// Every byte a ring AllReduce moves crosses the loopback once, and its W ranks move
// 2(W-1)/W of the vector each, so at this rate T its bus bandwidth is at most about
// T/W when the ranks share this machine's cores. That is a reference, not a hard
// bound: the kernel's copies dominate both, and a sender that stalls less could do
// somewhat better.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/tcp"
)

// bufBytes is what goccl's links ask for (tcp.bufsize's default).
var bufBytes = tcp.DefaultOptions().BufSize

// control sets what goccl's tcp links set before listen or connect.
func control(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		for _, name := range []string{"cubic", "reno"} {
			if serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name); serr == nil {
				break
			}
		}
		if serr != nil {
			return
		}
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, bufBytes); serr != nil {
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, bufBytes)
	})
	if err != nil {
		return err
	}
	return serr
}

func connect(ctx context.Context, sockets int) (a, b []net.Conn, err error) {
	lc := net.ListenConfig{Control: control}
	ln, err := lc.Listen(ctx, "tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	d := net.Dialer{Control: control}
	for range sockets {
		ca, err := d.DialContext(ctx, "tcp4", ln.Addr().String())
		if err != nil {
			return nil, nil, err
		}
		cb, err := ln.Accept()
		if err != nil {
			return nil, nil, err
		}
		for _, c := range []net.Conn{ca, cb} {
			if err := c.(*net.TCPConn).SetNoDelay(true); err != nil {
				return nil, nil, err
			}
		}
		a, b = append(a, ca), append(b, cb)
	}
	return a, b, nil
}

// stream is one socket's end: what it sends and where it receives, both touched
// before the timing starts.
type stream struct {
	c        net.Conn
	src, dst []byte
}

func streams(conns []net.Conn, per int) []stream {
	s := make([]stream, len(conns))
	for i, c := range conns {
		s[i] = stream{c, make([]byte, per), make([]byte, per)}
		for j := range s[i].src {
			s[i].src[j], s[i].dst[j] = byte(j), 1
		}
	}
	return s
}

// exchange sends every stream's src to the other end and receives its dst, all at
// once, and returns the time it took.
func exchange(all []stream) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(all))
	start := make(chan struct{})
	for _, st := range all {
		c, src, dst, per := st.c, st.src, st.dst, len(st.src)
		if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			return 0, err
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			for off := 0; off < per; off += 1 << 20 {
				if _, err := c.Write(src[off:min(off+1<<20, per)]); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if _, err := io.ReadFull(c, dst); err != nil {
				errs <- err
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	el := time.Since(t0)
	close(errs)
	return el, <-errs
}

func main() {
	mib := flag.Int("mib", 64, "bytes each side sends per round, MiB")
	sockets := flag.Int("sockets", 2, "loopback connections")
	flag.Parse()
	if *mib < 1 || *sockets < 1 || *mib<<20 < *sockets {
		fmt.Fprintf(os.Stderr, "tcpbw: -mib %d -sockets %d: want at least 1 MiB and 1 socket\n", *mib, *sockets)
		os.Exit(2)
	}
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b, err := connect(ctx, *sockets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tcpbw:", err)
		os.Exit(1)
	}
	per := (*mib << 20) / *sockets
	all := append(streams(a, per), streams(b, per)...)
	best := 0.0
	for round := range 6 {
		el, err := exchange(all)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tcpbw:", err)
			os.Exit(1)
		}
		if round > 0 { // the first round grows the windows
			best = max(best, float64(2*per**sockets)/el.Seconds())
		}
	}
	fmt.Printf("tcp2_gbs %.2f\n", best/1e9)
}
