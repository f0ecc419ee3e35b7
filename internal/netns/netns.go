package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goccl/goccl/transport"
)

// namePrefix starts every namespace this package creates: "gocclns-<pid>-<n>-...".
const namePrefix = "gocclns-"

// MaxHosts is the most hosts one Net holds (host i has address 10.200.0.<i+1>).
const MaxHosts = 250

// Options describes the network New builds.
type Options struct {
	Hosts int // 1..MaxHosts
	// MTU of every interface; 0 means 9000, the jumbo frames of a cluster network
	// (veth's default 1500 costs tcp about a third of its throughput here).
	MTU int
}

// Host is one namespace of a Net.
type Host struct {
	Index int
	NS    string // the namespace name, for ip netns exec and ip -n
	Addr  string // its IPv4 address, 10.200.0.<Index+1>
	Iface string // its interface inside NS
	port  string // the other end of its cable, on the hub's bridge
}

// Net is a set of host namespaces on one bridge. Close it when done.
type Net struct {
	id    string
	hub   string
	hosts []Host

	mu     sync.Mutex
	closed bool
}

// Available returns nil where New can work, else an error wrapping
// transport.ErrNotSupported that says what is missing.
func Available() error {
	switch {
	case runtime.GOOS != "linux":
		return fmt.Errorf("netns: %w: network namespaces are Linux-only (this is %s)", transport.ErrNotSupported, runtime.GOOS)
	case os.Geteuid() != 0:
		return fmt.Errorf("netns: %w: creating network namespaces needs root (running as uid %d)",
			transport.ErrNotSupported, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("netns: %w: iproute2's ip command is not installed (apt-get install iproute2): %v",
			transport.ErrNotSupported, err)
	}
	return nil
}

var seq atomic.Int64

// New creates o.Hosts host namespaces cabled to one bridge, each with its loopback and
// its interface up and its address assigned. On error nothing is left behind.
func New(ctx context.Context, o Options) (*Net, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.Hosts < 1 || o.Hosts > MaxHosts {
		return nil, fmt.Errorf("netns: %w: %d hosts; want 1..%d", transport.ErrInvalid, o.Hosts, MaxHosts)
	}
	if o.MTU == 0 {
		o.MTU = 9000
	}
	if o.MTU < 1280 || o.MTU > 65535 {
		return nil, fmt.Errorf("netns: %w: MTU %d; want 1280..65535 (0 means 9000)", transport.ErrInvalid, o.MTU)
	}
	Sweep(ctx)
	id := fmt.Sprintf("%s%d-%d", namePrefix, os.Getpid(), seq.Add(1))
	n := &Net{id: id, hub: id + "-hub"}
	if err := n.build(ctx, o); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

func (n *Net) build(ctx context.Context, o Options) error {
	mtu := strconv.Itoa(o.MTU)
	steps := [][]string{
		{"netns", "add", n.hub},
		{"-n", n.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", n.hub, "link", "set", "br0", "up"},
	}
	for i := range o.Hosts {
		h := Host{Index: i, NS: fmt.Sprintf("%s-h%d", n.id, i), Addr: fmt.Sprintf("10.200.0.%d", i+1), Iface: "eth0",
			port: fmt.Sprintf("p%d", i)}
		n.hosts = append(n.hosts, h)
		steps = append(steps,
			[]string{"netns", "add", h.NS},
			[]string{"-n", h.NS, "link", "set", "lo", "up"},
			// Both ends are created straight in their namespaces, so no name is ever
			// taken in the machine's own namespace.
			[]string{"link", "add", h.Iface, "netns", h.NS, "mtu", mtu, "type", "veth",
				"peer", "name", h.port, "netns", n.hub, "mtu", mtu},
			[]string{"-n", n.hub, "link", "set", h.port, "master", "br0", "up"},
			[]string{"-n", h.NS, "addr", "add", h.Addr + "/24", "dev", h.Iface},
			[]string{"-n", h.NS, "link", "set", h.Iface, "up"},
		)
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// ip runs one ip command and returns its output in the error when it fails.
func ip(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Hosts returns the hosts, in index order.
func (n *Net) Hosts() []Host { return append([]Host(nil), n.hosts...) }

// Host returns host i, or an error naming the valid range.
func (n *Net) Host(i int) (Host, error) {
	if i < 0 || i >= len(n.hosts) {
		return Host{}, fmt.Errorf("netns: %w: host %d; this net has hosts 0..%d", transport.ErrInvalid, i, len(n.hosts)-1)
	}
	return n.hosts[i], nil
}

// Command returns a command that runs name with args inside host i (through ip netns
// exec, which execs the program itself, so the process is the one signals reach). For
// an invalid host, Start returns the error.
func (n *Net) Command(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	h, err := n.Host(i)
	if err != nil {
		cmd := exec.CommandContext(ctx, "ip")
		cmd.Err = err
		return cmd
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Cut unplugs host i's cable: the bridge side of its veth goes down, so the host's
// interface loses carrier and every packet to or from it is dropped, as when a host's
// link or switch port fails. Its processes keep running and see only silence.
func (n *Net) Cut(ctx context.Context, i int) error {
	h, err := n.Host(i)
	if err != nil {
		return err
	}
	return ip(ctx, "-n", n.hub, "link", "set", h.port, "down")
}

// Restore plugs host i's cable back in.
func (n *Net) Restore(ctx context.Context, i int) error {
	h, err := n.Host(i)
	if err != nil {
		return err
	}
	return ip(ctx, "-n", n.hub, "link", "set", h.port, "up")
}

// Close deletes every namespace of n (their interfaces and the bridge go with them).
// Processes still running inside keep their namespace alive until they exit, but it is
// no longer reachable by name. Close is idempotent.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, ns := range namespacesWithPrefix(n.id + "-") { // the hosts and the hub
		if err := ip(context.Background(), "netns", "del", ns); err != nil && exists(ns) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// exists reports whether a namespace of that name is mounted.
func exists(ns string) bool {
	_, err := os.Stat("/run/netns/" + ns)
	return err == nil
}

// namespacesWithPrefix lists the mounted network namespaces whose names start with p.
func namespacesWithPrefix(p string) []string {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), p) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Sweep deletes the namespaces left by processes of this package that are gone (a test
// binary killed before its cleanup ran). It is best effort and returns what it removed.
func Sweep(ctx context.Context) []string {
	var removed []string
	for _, ns := range namespacesWithPrefix(namePrefix) {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(ns, namePrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		if ip(ctx, "netns", "del", ns) == nil {
			removed = append(removed, ns)
		}
	}
	return removed
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ForTest builds a net of hosts for t and deletes it when t ends (also when t fails).
// Where namespaces cannot be made it skips t with the reason; any other error fails t.
func ForTest(t testing.TB, hosts int) *Net {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	n, err := New(context.Background(), Options{Hosts: hosts})
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return n
}
