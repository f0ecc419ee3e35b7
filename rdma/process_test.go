package rdma

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

// dirStore is a rendezvous store in a directory, enough for two test processes:
// Set writes a file atomically, Get polls for it.
type dirStore struct{ dir string }

func (s dirStore) path(k string) string { return filepath.Join(s.dir, strings.ReplaceAll(k, "/", "_")) }

func (s dirStore) Set(_ context.Context, k string, v []byte) error {
	tmp := s.path(k) + ".tmp"
	if err := os.WriteFile(tmp, v, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path(k))
}

func (s dirStore) Get(ctx context.Context, k string) ([]byte, error) {
	for {
		if b, err := os.ReadFile(s.path(k)); err == nil {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dirstore: waiting for %q: %w", k, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (s dirStore) Add(context.Context, string, int64) (int64, error) {
	return 0, transport.ErrNotSupported
}
func (s dirStore) Delete(_ context.Context, k string) error { os.Remove(s.path(k)); return nil }
func (s dirStore) Close() error                             { return nil }

const (
	envChild = "GOCCL_RDMA_TEST_CHILD"
	envDir   = "GOCCL_RDMA_TEST_DIR"
)

// TestMain turns the test binary into rank 1 of a two-process test when re-executed.
func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		if err := child(mode, os.Getenv(envDir)); err != nil {
			fmt.Fprintln(os.Stderr, "rdma test child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// processParams use small slots so every large message needs many chunks and the
// sender runs out of credits constantly, between real processes.
var processParams = transport.Params{ParamProvider: "soft", ParamChunkBytes: "4096", ParamCredits: "2", ParamQPsPerPeer: "2"}

var processSizes = []int{0, 1, 4055, 4056, 4057, 12289, 1<<20 + 3}

// child is rank 1. "echo" returns every message with each byte incremented, then
// closes; "die-recv" exits in the middle of receiving; "die-send" sends a large message
// and waits to be killed.
func child(mode, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ep, err := Transport{}.Open(ctx, transport.Local{CommID: "two-proc", Rank: 1, World: 2, Host: "this-host", Store: dirStore{dir}, Params: processParams})
	if err != nil {
		return err
	}
	if err := (dirStore{dir}).Set(ctx, "handle-1", ep.Handle()); err != nil {
		return err
	}
	h, err := dirStore{dir}.Get(ctx, "handle-0")
	if err != nil {
		return err
	}
	c, err := ep.Connect(ctx, transport.PeerInfo{Rank: 0, Host: "this-host", Handle: h})
	if err != nil {
		return err
	}
	switch mode {
	case "echo":
		for i, n := range processSizes {
			buf := make([]byte, n)
			if err := c.Recv(ctx, hdr(uint64(i), n), buf); err != nil {
				return err
			}
			for j := range buf {
				buf[j]++
			}
			if err := c.Send(ctx, hdr(uint64(i), n), buf); err != nil {
				return err
			}
		}
		return c.Close()
	case "die-recv":
		return c.(transport.Streamer).RecvStream(ctx, hdr(0, 8<<20), 8<<20, func(int, []byte) error {
			os.Exit(3) // gone without closing anything, like a crash
			return nil
		})
	case "die-send":
		return c.Send(ctx, hdr(0, 8<<20), make([]byte, 8<<20))
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func startChild(t *testing.T, mode string) (string, *exec.Cmd) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+mode, envDir+"="+dir)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return dir, cmd
}

func rank0(t *testing.T, dir string) transport.Conn {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	ep, err := Transport{}.Open(ctx, transport.Local{CommID: "two-proc", Rank: 0, World: 2, Host: "this-host", Store: dirStore{dir}, Params: processParams})
	require.NoError(t, err)
	t.Cleanup(func() { ep.Close() })
	require.NoError(t, dirStore{dir}.Set(ctx, "handle-0", ep.Handle()))
	h, err := dirStore{dir}.Get(ctx, "handle-1")
	require.NoError(t, err)
	c, err := ep.Connect(ctx, transport.PeerInfo{Rank: 1, Host: "this-host", Handle: h})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTwoProcesses moves messages of every awkward size between two real processes
// over the software provider and checks them against an independently computed result.
func TestTwoProcesses(t *testing.T) {
	dir, cmd := startChild(t, "echo")
	c := rank0(t, dir)
	ctx := ctxT(t, 60*time.Second)
	for i, n := range processSizes {
		p := pattern(n, int64(i))
		require.NoError(t, c.Send(ctx, hdr(uint64(i), n), p))
		got := make([]byte, n)
		require.NoError(t, c.Recv(ctx, hdr(uint64(i), n), got), "size %d", n)
		for j := range p {
			p[j]++
		}
		require.Equal(t, p, got, "size %d", n)
	}
	// The child closes after the last echo: the next receive names the closed peer.
	err := c.Recv(ctx, hdr(99, 1), make([]byte, 1))
	require.ErrorIs(t, err, transport.ErrPeer)
	require.ErrorIs(t, err, transport.ErrClosed)
	require.NoError(t, cmd.Wait())
}

// TestPeerDiesWhileReceiving: rank 1 exits in the middle of a message rank 0 is sending;
// rank 0's Send must fail naming rank 1 (through the liveness probe), not hang.
func TestPeerDiesWhileReceiving(t *testing.T) {
	dir, cmd := startChild(t, "die-recv")
	c := rank0(t, dir)
	ctx := ctxT(t, 30*time.Second)
	err := c.Send(ctx, hdr(0, 8<<20), make([]byte, 8<<20))
	require.Error(t, err)
	require.ErrorIs(t, err, transport.ErrPeer)
	require.Contains(t, err.Error(), "rank 1")
	require.NoError(t, ctx.Err(), "the error came from the deadline, not from detecting the dead peer")
	var ee *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &ee)
	require.Equal(t, 3, ee.ExitCode())
}

// TestPeerDiesWhileSending: rank 1 is killed while rank 0 is in the middle of receiving
// its message; the receive fails naming rank 1 and the verbs status.
func TestPeerDiesWhileSending(t *testing.T) {
	dir, cmd := startChild(t, "die-send")
	c := rank0(t, dir)
	ctx := ctxT(t, 30*time.Second)
	killed := false
	err := c.(transport.Streamer).RecvStream(ctx, hdr(0, 8<<20), 8<<20, func(int, []byte) error {
		if !killed {
			killed = true
			require.NoError(t, cmd.Process.Kill())
			cmd.Wait()
		}
		return nil
	})
	require.True(t, killed)
	require.Error(t, err)
	require.ErrorIs(t, err, transport.ErrPeer)
	require.Contains(t, err.Error(), "rank 1")
	require.Contains(t, err.Error(), "transport retry counter exceeded")
	require.NoError(t, ctx.Err())
	require.False(t, errors.Is(err, transport.ErrTimeout))
}
