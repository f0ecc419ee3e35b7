//go:build linux

package shm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/shm/shmtest"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// Ranks as real processes: the test binary re-executes itself with GOCCL_SHM_CHILD set
// to a role; the child links to the test process (the other rank) through a FileStore
// in a temporary directory and runs the role.

const childEnv = "GOCCL_SHM_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := childMain(role); err != nil {
			fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// procRank is one rank's view of a two-rank communicator shared between processes.
type procRank struct {
	store  *shmtest.FileStore
	comm   string
	rank   int
	params transport.Params
}

// open opens the endpoint and publishes this rank's PeerInfo in the store.
func (p procRank) open(ctx context.Context) (transport.Endpoint, error) {
	ep, err := Transport{}.Open(ctx, transport.Local{CommID: p.comm, Rank: p.rank, World: 2, Host: "h",
		Store: p.store, Timeout: 20 * time.Second, Params: p.params})
	if err != nil {
		return nil, err
	}
	me, _ := json.Marshal(transport.PeerInfo{Rank: p.rank, Host: "h", Pid: os.Getpid(), Handle: ep.Handle()})
	return ep, p.store.Set(ctx, fmt.Sprintf("info/%d", p.rank), me)
}

// connect reads the other rank's PeerInfo and links to it.
func (p procRank) connect(ctx context.Context, ep transport.Endpoint) (*conn, error) {
	b, err := p.store.Get(ctx, fmt.Sprintf("info/%d", 1-p.rank))
	if err != nil {
		return nil, err
	}
	var peer transport.PeerInfo
	if err := json.Unmarshal(b, &peer); err != nil {
		return nil, err
	}
	c, err := ep.Connect(ctx, peer)
	if err != nil {
		return nil, err
	}
	return c.(*conn), nil
}

func (p procRank) link(ctx context.Context) (*conn, error) {
	ep, err := p.open(ctx)
	if err != nil {
		return nil, err
	}
	return p.connect(ctx, ep)
}

func childMain(role string) error {
	store, err := shmtest.NewFileStore(os.Getenv("GOCCL_SHM_STORE"))
	if err != nil {
		return err
	}
	rank, _ := strconv.Atoi(os.Getenv("GOCCL_SHM_RANK"))
	p := procRank{store: store, comm: os.Getenv("GOCCL_SHM_COMM"), rank: rank, params: parseParams(os.Getenv("GOCCL_SHM_PARAMS"))}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if role == "linkonly" { // publish the PeerInfo, then wait to be killed before linking
		if _, err := p.open(ctx); err != nil {
			return err
		}
		time.Sleep(time.Minute)
		return nil
	}
	c, err := p.link(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	n, _ := strconv.Atoi(os.Getenv("GOCCL_SHM_SIZE"))
	switch role {
	case "stress":
		seed, _ := strconv.ParseUint(os.Getenv("GOCCL_SHM_SEED"), 10, 64)
		return stress(ctx, c, seed)
	case "recvloop":
		buf := make([]byte, n)
		for i := 0; ; i++ {
			if err := c.Recv(ctx, transporttest.Header(uint64(i), n, 0), buf); err != nil {
				return err
			}
			_ = store.Set(ctx, "progress", []byte(strconv.Itoa(i)))
		}
	case "sendloop":
		buf := transporttest.Pattern(n, 1)
		for i := 0; ; i++ {
			if err := c.Send(ctx, transporttest.Header(uint64(i), n, 0), buf); err != nil {
				return err
			}
		}
	case "sink": // receive count messages of n bytes, then say done
		count, _ := strconv.Atoi(os.Getenv("GOCCL_SHM_COUNT"))
		buf := make([]byte, n)
		for i := range count {
			if err := c.Recv(ctx, transporttest.Header(uint64(i), n, 0), buf); err != nil {
				return err
			}
		}
		return c.Send(ctx, transporttest.Header(0, 1, 1), []byte{1})
	case "exchange": // send and receive count messages of n bytes at once
		count, _ := strconv.Atoi(os.Getenv("GOCCL_SHM_COUNT"))
		return exchange(ctx, c, n, count)
	case "swap": // send, then receive, count messages of n bytes, in step with the peer
		count, _ := strconv.Atoi(os.Getenv("GOCCL_SHM_COUNT"))
		return swap(ctx, c, make([]byte, n), count)
	case "echo": // bounce count messages of n bytes
		count, _ := strconv.Atoi(os.Getenv("GOCCL_SHM_COUNT"))
		buf := make([]byte, n)
		for i := range count {
			h := transporttest.Header(uint64(i), n, 0)
			if err := c.Recv(ctx, h, buf); err != nil {
				return err
			}
			if err := c.Send(ctx, h, buf); err != nil {
				return err
			}
		}
		return nil
	case "panic":
		if err := c.Send(ctx, transporttest.Header(0, 5, 0), []byte("hello")); err != nil {
			return err
		}
		panic("rank 1 panics on purpose")
	case "created": // rank 0: create and publish the segment, then wait to be killed
		_ = store.Set(ctx, "created", nil)
		time.Sleep(time.Minute)
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

func parseParams(s string) transport.Params {
	p := transport.Params{}
	for kv := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			p[k] = v
		}
	}
	return p
}

func formatParams(p transport.Params) string {
	var kv []string
	for k, v := range p {
		kv = append(kv, k+"="+v)
	}
	return strings.Join(kv, ",")
}

// spawn starts the other rank as a process with role and returns this process's rank.
func spawn(t testing.TB, role string, childRank int, params transport.Params, extra ...string) (procRank, *exec.Cmd) {
	t.Helper()
	store, err := shmtest.NewFileStore(t.TempDir())
	require.NoError(t, err)
	comm := transporttest.CommID("proc")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "GOCCL_SHM_STORE="+store.Dir, "GOCCL_SHM_COMM="+comm,
		"GOCCL_SHM_RANK="+strconv.Itoa(childRank), "GOCCL_SHM_PARAMS="+formatParams(params))
	cmd.Env = append(cmd.Env, extra...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("child output:\n%s", out.String())
		}
		require.Empty(t, leftovers(t, comm), "segments left in /dev/shm")
	})
	return procRank{store: store, comm: comm, rank: 1 - childRank, params: params}, cmd
}

// stress sends 150 messages of random sizes (seeded, so the peer can regenerate them)
// while receiving the peer's 150, checking every byte; half of the receives go through
// RecvStream.
func stress(ctx context.Context, c *conn, seed uint64) error {
	const count = 150
	size := func(rank, i int) int {
		r := rand.New(rand.NewPCG(seed, uint64(rank*count+i)))
		switch r.IntN(4) {
		case 0:
			return r.IntN(65)
		case 1:
			return r.IntN(70 << 10)
		case 2:
			return r.IntN(600 << 10)
		}
		return r.IntN(3 << 20)
	}
	content := func(rank, i int) uint64 { return seed<<20 | uint64(rank)<<16 | uint64(i) }
	var wg sync.WaitGroup
	var sendErr error
	wg.Go(func() {
		for i := range count {
			n := size(c.self, i)
			if err := c.Send(ctx, transporttest.Header(uint64(i), n, 3), transporttest.Pattern(n, content(c.self, i))); err != nil {
				sendErr = fmt.Errorf("send %d (%d bytes): %w", i, n, err)
				return
			}
		}
	})
	recvErr := func() error {
		for i := range count {
			n := size(c.peer, i)
			h := transporttest.Header(uint64(i), n, 3)
			got := make([]byte, n)
			var err error
			if i%2 == 0 {
				err = c.Recv(ctx, h, got)
			} else {
				err = c.RecvStream(ctx, h, n, func(off int, p []byte) error { copy(got[off:], p); return nil })
			}
			if err != nil {
				return fmt.Errorf("recv %d (%d bytes): %w", i, n, err)
			}
			if d := transporttest.Diff(got, transporttest.Pattern(n, content(c.peer, i))); d != "" {
				return fmt.Errorf("message %d (%d bytes): %s", i, n, d)
			}
		}
		return nil
	}()
	wg.Wait()
	return errors.Join(sendErr, recvErr)
}

// TestProcStress: two processes exchange randomised traffic both ways at once, with
// every byte checked, through the ring and through single-copy. The race detector
// cannot see the mapping, so this is what checks the ring's memory ordering.
func TestProcStress(t *testing.T) {
	for i, tc := range []struct {
		name string
		m    transport.Params
	}{
		{"small ring", transport.Params{"shm.single_copy": "false", "shm.stream_stores": "false", "shm.ring_bytes": "64K", "shm.chunk_bytes": "4K"}},
		{"small ring, streamed", transport.Params{"shm.single_copy": "false", "shm.stream_stores": "true", "shm.ring_bytes": "64K", "shm.chunk_bytes": "4K"}},
		{"defaults without single-copy", transport.Params{"shm.single_copy": "false"}},
		{"single-copy from 100K", transport.Params{"shm.single_copy": "true", "shm.single_copy_min": "100K", "shm.ring_bytes": "128K", "shm.chunk_bytes": "8K"}},
	} {
		m := tc.m
		t.Run(tc.name, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano()) + uint64(i)
			t.Logf("seed %d", seed)
			me, cmd := spawn(t, "stress", 1, m, fmt.Sprintf("GOCCL_SHM_SEED=%d", seed))
			ctx := ctxT(t)
			c, err := me.link(ctx)
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, stress(ctx, c, seed))
			require.NoError(t, cmd.Wait(), "the child rank failed")
		})
	}
}

// TestProcKill: SIGKILL of a peer mid-transfer turns the survivor's blocked Send or
// Recv into a *transport.PeerError (not a hang, not the context's timeout), and leaves
// nothing in /dev/shm.
func TestProcKill(t *testing.T) {
	const n = 4 << 20
	for _, tc := range []struct {
		name   string
		role   string // the child's loop: the test process does the opposite
		params transport.Params
	}{
		{"receiver killed/ring", "recvloop", transport.Params{"shm.single_copy": "false"}},
		{"receiver killed/singlecopy", "recvloop", transport.Params{"shm.single_copy": "true"}},
		{"sender killed/ring", "sendloop", transport.Params{"shm.single_copy": "false"}},
		{"sender killed/singlecopy", "sendloop", transport.Params{"shm.single_copy": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			me, cmd := spawn(t, tc.role, 1, tc.params, fmt.Sprintf("GOCCL_SHM_SIZE=%d", n))
			ctx := ctxT(t)
			c, err := me.link(ctx)
			require.NoError(t, err)
			defer c.Close()
			var killed time.Time
			kill := func() { killed = time.Now(); require.NoError(t, cmd.Process.Signal(syscall.SIGKILL)) }
			buf := transporttest.Pattern(n, 1)
			for i := 0; ; i++ {
				if i == 3 {
					kill()
				}
				h := transporttest.Header(uint64(i), n, 0)
				if tc.role == "recvloop" {
					err = c.Send(ctx, h, buf)
				} else {
					err = c.Recv(ctx, h, buf)
				}
				if err != nil {
					break
				}
				require.Less(t, i, 10000, "no error after the peer was killed")
			}
			require.False(t, killed.IsZero(), "the link failed before the kill: %v", err)
			var pe *transport.PeerError
			require.ErrorAs(t, err, &pe, "want a PeerError, got %v", err)
			require.Equal(t, 1, pe.Peer)
			require.NotErrorIs(t, err, transport.ErrTimeout)
			t.Logf("error %v after the kill: %v", time.Since(killed), err)
		})
	}
}

// TestProcPanic: a rank that panics after linking is noticed like a killed one.
func TestProcPanic(t *testing.T) {
	me, cmd := spawn(t, "panic", 1, nil)
	ctx := ctxT(t)
	c, err := me.link(ctx)
	require.NoError(t, err)
	defer c.Close()
	got := make([]byte, 5)
	require.NoError(t, c.Recv(ctx, transporttest.Header(0, 5, 0), got))
	require.Equal(t, "hello", string(got))
	err = c.Recv(ctx, transporttest.Header(1, 5, 0), got)
	require.ErrorIs(t, err, transport.ErrPeer)
	require.Error(t, cmd.Wait(), "the child should have died of its panic")
}

// TestProcDeathWhileLinking: a creator killed after publishing its segment, and an
// attacher killed before it attached, both leave the survivor with an error and no
// file in /dev/shm.
func TestProcDeathWhileLinking(t *testing.T) {
	t.Run("creator killed", func(t *testing.T) {
		me, cmd := spawn(t, "created", 0, nil)
		ctx := ctxT(t)
		ep, err := me.open(ctx)
		require.NoError(t, err)
		_, err = me.store.Get(ctx, "created")
		require.NoError(t, err)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		c, err := me.connect(ctx, ep)
		if err == nil { // the segment was still there: the first wait notices the death
			defer c.Close()
			err = c.Recv(ctx, transporttest.Header(0, 1, 0), make([]byte, 1))
		}
		require.ErrorIs(t, err, transport.ErrPeer)
	})
	t.Run("attacher killed", func(t *testing.T) {
		me, cmd := spawn(t, "linkonly", 1, nil)
		ctx := ctxT(t)
		_, err := me.store.Get(ctx, "info/1")
		require.NoError(t, err)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		c, err := me.link(ctx) // rank 0 creates and returns at once
		require.NoError(t, err)
		defer c.Close()
		err = c.Recv(ctx, transporttest.Header(0, 1, 0), make([]byte, 1))
		require.ErrorIs(t, err, transport.ErrPeer)
		require.Empty(t, leftovers(t, me.comm), "the survivor must remove a segment its peer never mapped")
	})
}

// swap sends buf and then receives the peer's into it, count times: a two-rank small
// AllReduce's exchange, with both ranks sending at once.
func swap(ctx context.Context, c *conn, buf []byte, count int) error {
	for i := range count {
		h := transporttest.Header(uint64(i), len(buf), 0)
		if err := c.Send(ctx, h, buf); err != nil {
			return err
		}
		if err := c.Recv(ctx, h, buf); err != nil {
			return err
		}
	}
	return nil
}

// exchange sends count messages of n bytes while receiving as many, as a ring
// collective's step does on every rank.
func exchange(ctx context.Context, c *conn, n, count int) error {
	src, dst := transporttest.Pattern(n, 1), make([]byte, n)
	var wg sync.WaitGroup
	var sendErr error
	wg.Go(func() {
		for i := range count {
			if sendErr = c.Send(ctx, transporttest.Header(uint64(i), n, 0), src); sendErr != nil {
				return
			}
		}
	})
	var recvErr error
	for i := range count {
		if recvErr = c.Recv(ctx, transporttest.Header(uint64(i), n, 0), dst); recvErr != nil {
			break
		}
	}
	wg.Wait()
	return errors.Join(sendErr, recvErr)
}
