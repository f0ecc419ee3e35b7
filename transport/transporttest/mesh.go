package transporttest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// Options tunes the suite for one transport.
type Options struct {
	// Params are passed to every Open ("tcp.addr": "127.0.0.1:0").
	Params transport.Params
	// Host gives each rank's host identity; nil means "localhost" for every rank.
	Host func(rank int) string
	// Worlds are the world sizes the mesh test tries; nil means 2, 3 and 4.
	Worlds []int
	// MaxMessage is the largest message the size test sends; 0 means 64 MiB.
	MaxMessage int
	// Timeout bounds every blocking step of a test (connect, a transfer); 0 means 60 s.
	// It is a hang detector, not a speed requirement.
	Timeout time.Duration
	// AuthToken, when set, is given to every rank.
	AuthToken []byte
	// Logger receives the endpoints' logs; nil discards them (t.Log cannot be used from
	// goroutines that may outlive a test).
	Logger *slog.Logger

	// SkipCancelSend skips "ctx cancel unblocks a Send blocked on a full link", for a
	// transport that never blocks a sender.
	SkipCancelSend bool
	// SkipStreamer skips the Streamer checks even when the Conn implements Streamer.
	SkipStreamer bool
	// SkipClose skips the close-semantics checks.
	SkipClose bool
}

func (o Options) withDefaults() Options {
	if o.Host == nil {
		o.Host = func(int) string { return "localhost" }
	}
	if len(o.Worlds) == 0 {
		o.Worlds = []int{2, 3, 4}
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = 64 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

var commSeq atomic.Int64

// CommID returns a communicator id unique within this process and across processes
// that run at the same time (it includes the pid).
func CommID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), commSeq.Add(1))
}

// Open opens one endpoint per rank of a new communicator of the given world size and
// returns them with the PeerInfo every rank would learn from the rendezvous. The
// endpoints are closed by t.Cleanup.
func Open(t testing.TB, tr transport.Transport, world int, opt Options) ([]transport.Endpoint, []transport.PeerInfo) {
	t.Helper()
	opt = opt.withDefaults()
	comm := CommID("tt-" + tr.Name())
	store := rendezvous.NewMemStore()
	t.Cleanup(func() { _ = store.Close() })
	eps := make([]transport.Endpoint, world)
	infos := make([]transport.PeerInfo, world)
	ctx, cancel := context.WithTimeout(context.Background(), opt.Timeout)
	defer cancel()
	for r := range world {
		ep, err := tr.Open(ctx, Local(comm, r, world, store, opt))
		require.NoError(t, err, "open rank %d of %d", r, world)
		t.Cleanup(func() { _ = ep.Close() })
		eps[r] = ep
		infos[r] = transport.PeerInfo{Rank: r, Host: opt.Host(r), Pid: os.Getpid(), Handle: ep.Handle()}
	}
	return eps, infos
}

// Local builds the transport.Local the suite gives rank r of a communicator.
func Local(comm string, r, world int, store transport.Store, opt Options) transport.Local {
	opt = opt.withDefaults()
	return transport.Local{
		CommID:    comm,
		Rank:      r,
		World:     world,
		Host:      opt.Host(r),
		Store:     rendezvous.WithPrefix(store, comm),
		Timeout:   opt.Timeout,
		AuthToken: opt.AuthToken,
		Params:    opt.Params,
		Logger:    opt.Logger.With("rank", r),
	}
}

// Mesh opens a communicator of world ranks and connects every pair, both sides calling
// Connect at the same time as a communicator would. conns[i][j] is rank i's link to
// rank j (nil when i == j). Links and endpoints are closed by t.Cleanup.
func Mesh(t testing.TB, tr transport.Transport, world int, opt Options) [][]transport.Conn {
	t.Helper()
	opt = opt.withDefaults()
	eps, infos := Open(t, tr, world, opt)
	conns, err := Connect(context.Background(), eps, infos, opt.Timeout)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, row := range conns {
			for _, c := range row {
				if c != nil {
					_ = c.Close()
				}
			}
		}
	})
	return conns
}

// Connect links every pair of endpoints concurrently (both sides call Connect) and
// returns conns[i][j], or the first error. On error every link made is closed.
func Connect(ctx context.Context, eps []transport.Endpoint, infos []transport.PeerInfo, timeout time.Duration) ([][]transport.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	world := len(eps)
	conns := make([][]transport.Conn, world)
	for i := range conns {
		conns[i] = make([]transport.Conn, world)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range world {
		for j := range world {
			if i == j {
				continue
			}
			wg.Go(func() {
				c, err := eps[i].Connect(ctx, infos[j])
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if first == nil {
						first = fmt.Errorf("rank %d connect to rank %d: %w", i, j, err)
						cancel()
					}
					return
				}
				if c.Peer() != j {
					if first == nil {
						first = fmt.Errorf("rank %d connect to rank %d: link reports peer %d", i, j, c.Peer())
					}
				}
				conns[i][j] = c
			})
		}
	}
	wg.Wait()
	if first != nil {
		for _, row := range conns {
			for _, c := range row {
				if c != nil {
					_ = c.Close()
				}
			}
		}
		return nil, first
	}
	return conns, nil
}
