package rendezvous_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// stores returns a fresh store of every kind, each closed by t.Cleanup.
func stores(t *testing.T) map[string]func() transport.Store {
	return map[string]func() transport.Store{
		"mem": func() transport.Store {
			s := rendezvous.NewMemStore()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"tcp": func() transport.Store {
			srv, err := rendezvous.NewTCPStoreServer("127.0.0.1:0", rendezvous.ServerOptions{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = srv.Close() })
			s, err := rendezvous.DialTCPStore(context.Background(), srv.Addr(), rendezvous.ClientOptions{Timeout: 10 * time.Second})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"file": func() transport.Store {
			s, err := rendezvous.NewFileStore(t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestStoreSemantics holds every Store to the same behaviour.
func TestStoreSemantics(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("SetGet", func(t *testing.T) {
				s := mk()
				ctx := ctxT(t, 30*time.Second)
				big := strings.Repeat("v", 3<<20+1)
				for _, kv := range [][2]string{{"a", "1"}, {"with/slash", ""}, {"k\x00\xff", "bin\x00ary"}, {strings.Repeat("k", 4096), big}} {
					require.NoError(t, s.Set(ctx, kv[0], []byte(kv[1])))
					got, err := s.Get(ctx, kv[0])
					require.NoError(t, err)
					require.Equal(t, kv[1], string(got))
				}
				require.NoError(t, s.Set(ctx, "a", []byte("2")), "Set replaces")
				got, err := s.Get(ctx, "a")
				require.NoError(t, err)
				require.Equal(t, "2", string(got))
			})
			t.Run("GetWaits", func(t *testing.T) {
				s := mk()
				ctx := ctxT(t, 30*time.Second)
				res := make(chan string, 1)
				go func() {
					v, err := s.Get(ctx, "late")
					if err != nil {
						res <- "error: " + err.Error()
						return
					}
					res <- string(v)
				}()
				time.Sleep(30 * time.Millisecond)
				require.NoError(t, s.Set(ctx, "late", []byte("here")))
				require.Equal(t, "here", <-res)
			})
			t.Run("GetDeadline", func(t *testing.T) {
				s := mk()
				_, err := s.Get(ctxT(t, 100*time.Millisecond), "never")
				require.ErrorIs(t, err, transport.ErrTimeout)
				require.Contains(t, err.Error(), "never")
				// The store keeps working after a timed-out wait.
				require.NoError(t, s.Set(ctxT(t, 10*time.Second), "after", []byte("x")))
			})
			t.Run("GetCancel", func(t *testing.T) {
				s := mk()
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error, 1)
				go func() { _, err := s.Get(ctx, "never"); errc <- err }()
				time.Sleep(20 * time.Millisecond)
				cancel()
				require.ErrorIs(t, <-errc, context.Canceled)
			})
			t.Run("AddConcurrent", func(t *testing.T) {
				s := mk()
				ctx := ctxT(t, 60*time.Second)
				const workers, each = 8, 10
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						for range each {
							_, err := s.Add(ctx, "counter", int64(w+1))
							if err != nil {
								t.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				want := int64(each * workers * (workers + 1) / 2) // each*(1+2+...+workers)
				got, err := s.Add(ctx, "counter", 0)
				require.NoError(t, err)
				require.Equal(t, want, got)
				n, err := s.Add(ctx, "counter", -want-5)
				require.NoError(t, err)
				require.Equal(t, int64(-5), n)
				require.NoError(t, s.Set(ctx, "text", []byte("abc")))
				_, err = s.Add(ctx, "text", 1)
				require.ErrorIs(t, err, transport.ErrInvalid)
			})
			t.Run("Delete", func(t *testing.T) {
				s := mk()
				ctx := ctxT(t, 10*time.Second)
				require.NoError(t, s.Set(ctx, "d", []byte("x")))
				require.NoError(t, s.Delete(ctx, "d"))
				require.NoError(t, s.Delete(ctx, "d"), "deleting a missing key is not an error")
				_, err := s.Get(ctxT(t, 50*time.Millisecond), "d")
				require.ErrorIs(t, err, transport.ErrTimeout)
			})
			t.Run("Closed", func(t *testing.T) {
				s := mk()
				require.NoError(t, s.Close())
				err := s.Set(ctxT(t, 10*time.Second), "x", nil)
				require.ErrorIs(t, err, transport.ErrClosed)
			})
		})
	}
}

// TestStoreManyClients has several clients of one server rendezvous like ranks do.
func TestStoreManyClients(t *testing.T) {
	srv, err := rendezvous.NewTCPStoreServer("127.0.0.1:0", rendezvous.ServerOptions{})
	require.NoError(t, err)
	defer srv.Close()
	const world = 6
	ctx := ctxT(t, 30*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, world)
	for r := range world {
		wg.Go(func() {
			s, err := rendezvous.DialTCPStore(ctx, srv.Addr(), rendezvous.ClientOptions{})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			if err := s.Set(ctx, fmt.Sprintf("addr/%d", r), []byte(fmt.Sprint(r*r))); err != nil {
				errs <- err
				return
			}
			for p := range world {
				v, err := s.Get(ctx, fmt.Sprintf("addr/%d", p))
				if err != nil {
					errs <- err
					return
				}
				if string(v) != fmt.Sprint(p*p) {
					errs <- fmt.Errorf("rank %d read %q for rank %d", r, v, p)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
