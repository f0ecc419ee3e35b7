package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/goccl/goccl/transport/rendezvous"
	"github.com/stretchr/testify/require"
)

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// tcpHandles reads the ranks' tcp addresses from the job's store, as any stranger who
// can reach an unauthenticated store can.
func tcpHandles(ctx context.Context, store string, world int) ([]string, error) {
	s, err := rendezvous.DialTCPStore(ctx, store, rendezvous.ClientOptions{Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []string
	for r := range world {
		b, err := s.Get(ctx, "goccl/world.0/peer/"+strconv.Itoa(r))
		if err != nil {
			return out, err
		}
		var rec struct {
			Handles map[string][]byte `json:"handles"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return out, err
		}
		out = append(out, string(rec.Handles["tcp"]))
	}
	return out, nil
}

// garbage is what a stranger sends: random bytes, a framed message with a huge length,
// a plausible header with nonsense after it, and nothing at all (a connection that
// opens and closes, or sends one byte and stalls).
func garbage(rng *rand.Rand) []byte {
	switch rng.IntN(5) {
	case 0:
		b := make([]byte, 1+rng.IntN(4096))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	case 1: // a message type with the largest length field
		return []byte{byte(rng.IntN(8)), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	case 2: // tcp handshake framing {type, len u16} with a random body
		body := make([]byte, 1024)
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		return append(binary.LittleEndian.AppendUint16([]byte{1}, 1024), body...)
	case 3:
		return []byte{0}
	}
	return nil
}

// poke connects to addr, writes g, and keeps the socket open for hold.
func poke(addr string, g []byte, hold time.Duration) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(hold + time.Second))
	if len(g) > 0 {
		_, _ = c.Write(g)
	}
	time.Sleep(hold)
	var b [256]byte
	_, _ = c.Read(b[:])
}

// TestHostileStrangers runs a job that checks every AllReduce result for a few seconds
// while strangers send garbage to its store and to every rank's tcp listener (and hold
// idle connections). The job must finish with every result right.
func TestHostileStrangers(t *testing.T) {
	const w = 3
	port := freePort(t)
	store := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := job{n: w, env: []string{"GOCCL_TRANSPORT=tcp", "GOCCL_TIMEOUT=60s"},
		launcher: []string{"--store-port", strconv.Itoa(port)}, args: []string{"-mode", "hold", "-for", "4s"}}.start(t, ctx)
	handles, err := tcpHandles(ctx, store, w)
	require.NoError(t, err, "reading the ranks' addresses from the store\n%s", l.snapshot())
	targets := append([]string{store}, handles...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent [4]int
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := rng.IntN(len(targets))
				hold := time.Duration(0)
				if n%10 == 0 {
					hold = 500 * time.Millisecond // a slow stranger
				}
				poke(targets[k], garbage(rng), hold)
				if i == 0 {
					sent[k]++
				}
			}
		}()
	}
	res := l.wait()
	close(stop)
	wg.Wait()
	t.Logf("one of 8 strangers made %v connections to the store and ranks 0..%d", sent, w-1)
	require.Equal(t, 0, res.code, "the job was disturbed\n%s", res)
	ok := records(res.stdout, "HOLD-OK")
	require.Len(t, ok, w, "%s", res)
	for r, o := range ok {
		require.Positive(t, o.int("iters"), "rank %d ran no checked collective", r)
	}
}

// TestHostileFloodDuringInit: while rank 2 is late, a stranger opens idle connections to
// rank 1's listener (whose address the unauthenticated store gives away) and keeps them.
// The ranks must still link once rank 2 arrives.
func TestHostileFloodDuringInit(t *testing.T) {
	const w = 3
	port := freePort(t)
	store := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := job{n: w, env: []string{"GOCCL_TRANSPORT=tcp", "GOCCL_TIMEOUT=60s", "GOCCL_INIT_TIMEOUT=30s",
		"E2E_DELAY_RANK=2", "E2E_DELAY=3s"},
		launcher: []string{"--store-port", strconv.Itoa(port)}, args: []string{"-mode", "hold", "-for", "1s"}}.start(t, ctx)
	s, err := rendezvous.DialTCPStore(ctx, store, rendezvous.ClientOptions{Timeout: 30 * time.Second})
	require.NoError(t, err)
	b, err := s.Get(ctx, "goccl/world.0/peer/1")
	s.Close()
	require.NoError(t, err)
	var rec struct {
		Handles map[string][]byte `json:"handles"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	addr := string(rec.Handles["tcp"])
	var conns []net.Conn
	for range 300 {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	t.Logf("holding %d idle connections to rank 1 at %s", len(conns), addr)
	res := l.wait()
	for _, c := range conns {
		c.Close()
	}
	require.Equal(t, 0, res.code, "a stranger's idle connections kept the job from linking\n%s", res)
	require.Len(t, records(res.stdout, "HOLD-OK"), w, "%s", res)
}
