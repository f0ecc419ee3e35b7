package tcp

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goccl/goccl/transport"
)

// Params keys this transport reads, with their defaults.
const (
	// ParamAddr is the listen address ("127.0.0.1:0"; port 0 picks one). Default: the
	// address the rank's host name resolves to, port 0.
	ParamAddr = "tcp.addr"
	// ParamSockets is the number of sockets per peer (default 2, at most MaxSockets).
	ParamSockets = "tcp.sockets"
	// ParamBufSize is the socket send and receive buffer in bytes (default 4 MiB; 0
	// leaves the kernel's auto-tuning alone).
	ParamBufSize = "tcp.bufsize"
	// ParamStripeMin is the smallest message striped across the sockets (default 1 MiB).
	ParamStripeMin = "tcp.stripe_min"
	// ParamHandshakeTimeout bounds one socket's handshake ("10s").
	ParamHandshakeTimeout = "tcp.handshake_timeout"
	// ParamSpin is how long a receive polls its socket before it parks on the netpoller
	// ("500us"; "0s" parks at once). A parked receive pays a thread wake-up when the data
	// comes, 25-50 µs in a VM, against 10-15 µs for a small message's flight.
	ParamSpin = "tcp.spin"
	// ParamCongestion is the congestion control of every socket (TCP_CONGESTION): a
	// name the kernel allows ("cubic", "reno", "bbr"), "system" for the kernel default,
	// or "auto" (the default): cubic, else reno, on links within one host, and the
	// system's elsewhere. BBR, Debian's default on some images, paces every socket with
	// high-resolution timers; on loopback that costs about a quarter of the CPU per
	// byte and buys nothing (.proposals/tcp-bench.md).
	ParamCongestion = "tcp.congestion"
)

// Congestion settings with a meaning of their own.
const (
	CongestionAuto   = "auto"
	CongestionSystem = "system"
)

// maxSpin bounds tcp.spin: beyond it a rank burns CPU for nothing.
const maxSpin = 10 * time.Millisecond

// MaxSockets bounds tcp.sockets: more sockets than this only add overhead.
const MaxSockets = 64

// paramKeys lists every key ParseOptions reads, for its errors.
var paramKeys = []string{ParamAddr, ParamSockets, ParamBufSize, ParamStripeMin, ParamHandshakeTimeout, ParamSpin, ParamCongestion}

// Options are the endpoint's settings, parsed from transport.Params.
type Options struct {
	Addr             string
	Sockets          int
	BufSize          int
	StripeMin        int
	HandshakeTimeout time.Duration
	Spin             time.Duration // poll before parking; 0 = park at once
	Congestion       string        // TCP_CONGESTION, CongestionAuto or CongestionSystem
}

// DefaultOptions are the settings used for absent Params. StripeMin is 1 MiB: a striped
// message's header parks at once (spinReader.park), and for 256 KiB-512 KiB messages
// that wake-up cost more than the second socket gained (an AllReduce of 512 KiB at 2
// ranks, whose ring sends 256 KiB steps, took 292 us with 256 KiB and 231 with 1 MiB;
// at 4 ranks 256 KiB took 533 and 442; from 1 MiB the two were even; BENCHMARKS.md,
// "Speed", 44). Spin is 500 µs: with ranks outnumbering the cores a message is often
// more than 50 µs away, and a parked receive then also waits for its wake-up (4 ranks
// on 2 cores, AllReduce 64-256 KiB: 0.69-0.81x the time with 50 µs, 3 ranks 0.78-0.81x;
// 8 B 1.03-1.07x there; from 512 KiB, and at 2 ranks, the same within the noise;
// "Speed", 44e).
func DefaultOptions() Options {
	return Options{Sockets: 2, BufSize: 4 << 20, StripeMin: 1 << 20, HandshakeTimeout: 10 * time.Second,
		Spin: 500 * time.Microsecond, Congestion: CongestionAuto}
}

// ParseOptions reads the tcp.* Params. A malformed or out-of-range value is an error
// that names the key, the value and what is valid, rather than a silent default.
func ParseOptions(p transport.Params) (Options, error) {
	o := DefaultOptions()
	if k := transport.UnknownParam(p, "tcp.", paramKeys); k != "" {
		return o, fmt.Errorf("tcp: %w: unknown parameter %q (valid: %s)", transport.ErrInvalid, k, strings.Join(paramKeys, ", "))
	}
	o.Addr = p.String(ParamAddr, "")
	if o.Addr != "" {
		if _, _, err := net.SplitHostPort(o.Addr); err != nil {
			return o, fmt.Errorf("tcp: %w: %s=%q is not host:port (%v)", transport.ErrInvalid, ParamAddr, o.Addr, err)
		}
	}
	ints := []struct {
		key      string
		dst      *int
		min, max int
		bytes    bool // a byte count: 4M, 256K, ... (transport.ParseBytes)
	}{
		{ParamSockets, &o.Sockets, 1, MaxSockets, false},
		{ParamBufSize, &o.BufSize, 0, 1 << 30, true},
		{ParamStripeMin, &o.StripeMin, 4 << 10, 1 << 30, true},
	}
	for _, f := range ints {
		v, ok := p[f.key]
		if !ok {
			continue
		}
		parse, want := func(s string) (int, error) { return strconv.Atoi(strings.TrimSpace(s)) }, "an integer"
		if f.bytes {
			parse, want = transport.ParseBytes, "a byte count (such as 4M)"
		}
		n, err := parse(v)
		if err != nil || n < f.min || n > f.max {
			return o, fmt.Errorf("tcp: %w: %s=%q, want %s in [%d, %d]", transport.ErrInvalid, f.key, v, want, f.min, f.max)
		}
		*f.dst = n
	}
	if v, ok := p[ParamHandshakeTimeout]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return o, fmt.Errorf("tcp: %w: %s=%q, want a positive duration like \"10s\"", transport.ErrInvalid, ParamHandshakeTimeout, v)
		}
		o.HandshakeTimeout = d
	}
	if v, ok := p[ParamCongestion]; ok {
		if v == "" || len(v) > 15 || strings.ContainsFunc(v, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') }) {
			return o, fmt.Errorf("tcp: %w: %s=%q, want %q, %q or a congestion control name such as \"cubic\" or \"reno\"",
				transport.ErrInvalid, ParamCongestion, v, CongestionAuto, CongestionSystem)
		}
		o.Congestion = v
	}
	if v, ok := p[ParamSpin]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 || d > maxSpin {
			return o, fmt.Errorf("tcp: %w: %s=%q, want a duration between 0s and %v like \"50us\"", transport.ErrInvalid, ParamSpin, v, maxSpin)
		}
		o.Spin = d
	}
	return o, nil
}

// listenAddr picks the address to listen on: the configured one, or the host name's
// address with port 0. The host name is what the communicator calls this host; when it
// does not resolve, the machine's name is tried, then every interface (0.0.0.0).
func listenAddr(ctx context.Context, o Options, host string) string {
	if o.Addr != "" {
		return o.Addr
	}
	for _, h := range []string{host, hostname()} {
		if ip := resolve(ctx, h); ip != nil {
			return net.JoinHostPort(ip.String(), "0")
		}
	}
	return "0.0.0.0:0"
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// resolve returns h's first address, preferring IPv4, or nil.
func resolve(ctx context.Context, h string) net.IP {
	if h == "" {
		return nil
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, h)
	if err != nil || len(addrs) == 0 {
		return nil
	}
	for _, a := range addrs {
		if a.IP.To4() != nil {
			return a.IP
		}
	}
	return addrs[0].IP
}

// advertiseIP is the address peers should dial when the listener is bound to every
// interface: the first non-loopback IPv4 address that is up, else loopback.
func advertiseIP() net.IP {
	ifs, err := net.Interfaces()
	if err == nil {
		for _, ifc := range ifs {
			if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, _ := ifc.Addrs()
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
					return n.IP
				}
			}
		}
	}
	return net.IPv4(127, 0, 0, 1)
}
