package rendezvous_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport/rendezvous"
)

// TestFileStoreShared has two FileStores on one directory, as two processes would:
// values cross, and Add stays atomic under the directory's flock.
func TestFileStoreShared(t *testing.T) {
	dir := t.TempDir()
	a, err := rendezvous.NewFileStore(dir)
	require.NoError(t, err)
	b, err := rendezvous.NewFileStore(dir)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, a.Set(ctx, "from/a", []byte("hello")))
	v, err := b.Get(ctx, "from/a")
	require.NoError(t, err)
	require.Equal(t, "hello", string(v))
	var wg sync.WaitGroup
	for _, s := range []*rendezvous.FileStore{a, b} {
		wg.Go(func() {
			for range 25 {
				if _, err := s.Add(ctx, "n", 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	n, err := a.Add(ctx, "n", 0)
	require.NoError(t, err)
	require.Equal(t, int64(50), n)
	_, err = rendezvous.NewFileStore("")
	require.Error(t, err)
}
