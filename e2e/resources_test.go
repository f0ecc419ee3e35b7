package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/transport/rendezvous"
	"github.com/stretchr/testify/require"
)

// footprint is what a communicator may hold while alive and must give back.
type footprint struct {
	goroutines int
	fds        []string // /proc/self/fd targets
	shm        map[string]bool
}

func measure(t *testing.T) footprint {
	t.Helper()
	return footprint{goroutines: runtime.NumGoroutine(), fds: openFDs(t), shm: shmEntries(t)}
}

func openFDs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil {
			out = append(out, target)
		}
	}
	return out
}

// requireReleased waits (bounded: goroutines need a moment to observe a closed socket)
// until the process holds no more goroutines or descriptors than at base and no new
// segment of communicator comm exists, then fails with the details if not.
func requireReleased(t *testing.T, base footprint, comm string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var now footprint
	for {
		runtime.GC()
		now = measure(t)
		if now.goroutines <= base.goroutines && len(now.fds) <= len(base.fds) && len(newShm(t, base.shm, comm)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	require.LessOrEqual(t, now.goroutines, base.goroutines, "goroutines left behind:\n%s", buf)
	require.LessOrEqual(t, len(now.fds), len(base.fds), "descriptors left behind: before %v, after %v", base.fds, now.fds)
	require.Empty(t, newShm(t, base.shm, comm), "shm segments left behind")
}

// warm runs one communicator cycle so that lazily started process-wide goroutines (none
// are expected, but the runtime's and the resolver's exist) are in the baseline.
func warm(t *testing.T, tr string) {
	comms, err := goccl.InitLocal(context.Background(), 2, goccl.WithTransport(tr))
	require.NoError(t, err)
	for _, c := range comms {
		require.NoError(t, c.Close())
	}
}

// TestResourcesAfterClose: goroutine ranks over real tcp sockets and real shm segments
// run collectives and close; afterwards the process holds exactly what it held before.
func TestResourcesAfterClose(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			warm(t, tr)
			base := measure(t)
			const w = 3
			comms, err := goccl.InitLocal(context.Background(), w, goccl.WithTransport(tr), goccl.WithTimeout(time.Minute))
			require.NoError(t, err)
			id := comms[0].ID()
			require.NotEmpty(t, newShmOrSockets(t, base, tr, id), "the communicator holds nothing, so the check means nothing")
			var wg sync.WaitGroup
			errs := make([]error, w)
			for r, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := 1<<18 + 3
					if raceEnabled && tr == "shm" {
						n = 7 // see race_on_test.go
					}
					xs := make([]float32, n)
					for i := range xs {
						xs[i] = float32(r)
					}
					errs[r] = goccl.AllReduceSlice(context.Background(), c, xs, goccl.Sum)
					if errs[r] == nil && xs[n-1] != float32(w*(w-1)/2) {
						errs[r] = fmt.Errorf("rank %d: got %v", r, xs[n-1])
					}
					if errs[r] == nil { // and the goroutine that runs SendRecv's receives
						b := goccl.HostSlice(xs)
						errs[r] = c.SendRecv(context.Background(), b, (r+1)%w, b, (r+w-1)%w, n, goccl.Float32)
					}
				}()
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			for _, c := range comms {
				require.NoError(t, c.Close())
			}
			requireReleased(t, base, id)
			for _, c := range comms {
				require.ErrorIs(t, c.Barrier(context.Background()), goccl.ErrClosed, "a closed communicator must say so")
			}
		})
	}
}

// newShmOrSockets is what a live communicator holds beyond base: new descriptors (tcp
// sockets, pidfds) or segments.
func newShmOrSockets(t *testing.T, base footprint, tr, comm string) []string {
	out := newShm(t, base.shm, comm)
	if fds := openFDs(t); len(fds) > len(base.fds) {
		out = append(out, fds[len(base.fds):]...)
	}
	return out
}

// resName names the failed-Init communicators, so their segments are told apart from
// other jobs' on this machine.
const resName = "e2eres"

// TestResourcesAfterFailedInit: Inits that fail after opening endpoints (a peer that
// never comes, ranks configured differently, a store that refuses the token) release
// everything they took.
func TestResourcesAfterFailedInit(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, tr string) error
		want error // nil: run checked the errors itself
	}{
		{"peer never joins", func(t *testing.T, tr string) error {
			cfg := goccl.DefaultConfig().Apply(goccl.WithStore(rendezvous.NewMemStore()), goccl.WithRank(0, 2),
				goccl.WithTransport(tr), goccl.WithInitTimeout(300*time.Millisecond), goccl.WithName(resName))
			_, err := goccl.Init(context.Background(), cfg)
			return err
		}, goccl.ErrTimeout},
		{"ranks disagree on algo", func(t *testing.T, tr string) error {
			store := rendezvous.NewMemStore()
			errs := make([]error, 3)
			var wg sync.WaitGroup
			for r := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					algo := "ring"
					if r == 2 {
						algo = "tree"
					}
					cfg := goccl.DefaultConfig().Apply(goccl.WithStore(store), goccl.WithRank(r, 3), goccl.WithTransport(tr),
						goccl.WithAlgo(algo), goccl.WithInitTimeout(20*time.Second), goccl.WithName(resName))
					c, err := goccl.Init(context.Background(), cfg)
					if err == nil {
						c.Close()
						err = errors.New("Init succeeded")
					}
					errs[r] = err
				}()
			}
			wg.Wait()
			for r, err := range errs {
				if !errors.Is(err, goccl.ErrMismatch) && !errors.Is(err, goccl.ErrPeer) {
					return fmt.Errorf("rank %d: %w", r, err)
				}
			}
			// Which rank reads the odd record first is a race; the others learn of it
			// through init/abort, as a peer failure.
			return nil
		}, nil},
		{"store refuses token", func(t *testing.T, tr string) error {
			srv, err := rendezvous.NewTCPStoreServer("127.0.0.1:0", rendezvous.ServerOptions{AuthToken: []byte(token)})
			require.NoError(t, err)
			defer srv.Close()
			cfg := goccl.DefaultConfig().Apply(goccl.WithStoreAddr(srv.Addr()), goccl.WithRank(1, 2),
				goccl.WithTransport(tr), goccl.WithAuthToken("wrong"), goccl.WithInitTimeout(5*time.Second), goccl.WithName(resName))
			_, err = goccl.Init(context.Background(), cfg)
			return err
		}, goccl.ErrAuth},
	}
	for _, tr := range transports {
		for _, c := range cases {
			t.Run(tr+"/"+c.name, func(t *testing.T) {
				warm(t, tr)
				base := measure(t)
				err := c.run(t, tr)
				if c.want == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, c.want)
				}
				requireReleased(t, base, resName)
			})
		}
	}
}
