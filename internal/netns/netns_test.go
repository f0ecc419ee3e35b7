package netns_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/netns"
	"github.com/goccl/goccl/transport"
)

// TestMain doubles as the helper process that tests run inside a namespace:
// NETNS_HELPER=listen:ADDR echoes one line to each connection, dial:ADDR sends a line
// and prints the echo (or DIAL-ERROR).
func TestMain(m *testing.M) {
	if mode, addr, ok := strings.Cut(os.Getenv("NETNS_HELPER"), ":"); ok {
		os.Exit(helper(mode, addr))
	}
	os.Exit(m.Run())
}

func helper(mode, addr string) int {
	switch mode {
	case "listen":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("LISTEN-ERROR", err)
			return 1
		}
		fmt.Println("READY")
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "echo "+line)
			}()
		}
	case "dial":
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			fmt.Println("DIAL-ERROR", err)
			return 0
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(c, "hello\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			fmt.Println("DIAL-ERROR", err)
			return 0
		}
		fmt.Print(line)
		return 0
	}
	return 2
}

// helperCmd runs this test binary as a helper inside host i.
func helperCmd(ctx context.Context, n *netns.Net, i int, mode string) *exec.Cmd {
	cmd := n.Command(ctx, i, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NETNS_HELPER="+mode)
	return cmd
}

// listen starts a listener in host i and waits until it is ready.
func listen(t *testing.T, ctx context.Context, n *netns.Net, i int, addr string) {
	cmd := helperCmd(ctx, n, i, "listen:"+addr)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "READY\n", line)
}

func dial(t *testing.T, ctx context.Context, n *netns.Net, i int, addr string) string {
	out, err := helperCmd(ctx, n, i, "dial:"+addr).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

func TestHostsTalkAcrossTheBridge(t *testing.T) {
	n := netns.ForTest(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hosts := n.Hosts()
	require.Len(t, hosts, 3)
	for i, h := range hosts {
		require.Equal(t, fmt.Sprintf("10.200.0.%d", i+1), h.Addr)
	}
	h2 := hosts[2].Addr + ":7000"
	listen(t, ctx, n, 2, h2)
	require.Equal(t, "echo hello", dial(t, ctx, n, 0, h2), "host 0 reaches host 2")
	require.Equal(t, "echo hello", dial(t, ctx, n, 1, h2), "host 1 reaches host 2")

	// Each host has its own loopback: host 2's listener on 127.0.0.1 is not host 0's.
	listen(t, ctx, n, 2, "127.0.0.1:7001")
	require.Equal(t, "echo hello", dial(t, ctx, n, 2, "127.0.0.1:7001"))
	require.Contains(t, dial(t, ctx, n, 0, "127.0.0.1:7001"), "DIAL-ERROR")

	// A cut cable drops everything to host 2; restoring it brings it back.
	require.NoError(t, n.Cut(ctx, 2))
	require.Contains(t, dial(t, ctx, n, 0, h2), "DIAL-ERROR")
	require.NoError(t, n.Restore(ctx, 2))
	require.Eventually(t, func() bool { return dial(t, ctx, n, 0, h2) == "echo hello" }, 10*time.Second, 100*time.Millisecond)
}

func TestCloseRemovesEverything(t *testing.T) {
	n := netns.ForTest(t, 2)
	for _, h := range n.Hosts() {
		_, err := os.Stat("/run/netns/" + h.NS)
		require.NoError(t, err)
	}
	require.NoError(t, n.Close())
	require.NoError(t, n.Close(), "Close is idempotent")
	for _, h := range n.Hosts() {
		_, err := os.Stat("/run/netns/" + h.NS)
		require.True(t, os.IsNotExist(err), "%s still exists", h.NS)
	}
}

// TestSweep: namespaces left by a process that died are removed by the next New.
func TestSweep(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	stale := fmt.Sprintf("gocclns-%d-1-h0", dead.Process.Pid)
	require.NoError(t, exec.Command("ip", "netns", "add", stale).Run())
	t.Cleanup(func() { exec.Command("ip", "netns", "del", stale).Run() })
	require.Contains(t, netns.Sweep(context.Background()), stale)
	_, err := os.Stat("/run/netns/" + stale)
	require.True(t, os.IsNotExist(err))
	mine := netns.ForTest(t, 1)
	require.Empty(t, netns.Sweep(context.Background()), "a live process's namespaces stay")
	_, err = os.Stat("/run/netns/" + mine.Hosts()[0].NS)
	require.NoError(t, err)
}

func TestBadInput(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	ctx := context.Background()
	for _, o := range []netns.Options{{Hosts: 0}, {Hosts: netns.MaxHosts + 1}, {Hosts: 2, MTU: 100}} {
		_, err := netns.New(ctx, o)
		require.ErrorIs(t, err, transport.ErrInvalid, "%+v", o)
	}
	n := netns.ForTest(t, 1)
	_, err := n.Host(1)
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.ErrorContains(t, err, "hosts 0..0")
	require.ErrorIs(t, n.Cut(ctx, -1), transport.ErrInvalid)
	require.ErrorIs(t, n.Command(ctx, 7, "true").Run(), transport.ErrInvalid)
}
