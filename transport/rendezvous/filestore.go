package rendezvous

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/transport"
)

// FileStore is a Store in a directory on a file system every rank shares (NFS, Lustre,
// or /tmp for ranks on one host), like Gloo's FileStore and torch's file:// init. Each
// key is one file, written to a temporary name and renamed into place, so a reader sees
// the whole value or nothing. Add runs under an flock on the directory's lock file.
type FileStore struct {
	dir  string
	lock string

	mu     sync.Mutex
	closed bool
}

// NewFileStore uses (and creates) dir.
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, fmt.Errorf("rendezvous: %w: file store needs a directory", transport.ErrInvalid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("rendezvous: file store %s: %w", dir, err)
	}
	return &FileStore{dir: dir, lock: filepath.Join(dir, ".lock")}, nil
}

// path maps a key to a file name: base64url when it fits in a name, else a hash (keys
// may hold '/' and any byte, and may be longer than NAME_MAX).
func (s *FileStore) path(key string) string {
	name := "k-" + base64.RawURLEncoding.EncodeToString([]byte(key))
	if len(name) > 200 {
		sum := sha256.Sum256([]byte(key))
		name = "h-" + hex.EncodeToString(sum[:])
	}
	return filepath.Join(s.dir, name)
}

func (s *FileStore) check(op, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("rendezvous: file store %s: %s %q: %w", s.dir, op, key, transport.ErrClosed)
	}
	if len(key) == 0 || len(key) > MaxKey {
		return fmt.Errorf("rendezvous: file store: %w: key of %d bytes (want 1..%d)", transport.ErrInvalid, len(key), MaxKey)
	}
	return nil
}

// Set implements transport.Store.
func (s *FileStore) Set(ctx context.Context, key string, value []byte) error {
	if err := s.check("set", key); err != nil {
		return err
	}
	return s.locked(ctx, func() error { return s.write(key, value) })
}

func (s *FileStore) write(key string, value []byte) error {
	f, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("rendezvous: file store set %q: %w", key, err)
	}
	tmp := f.Name()
	_, err = f.Write(value)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path(key))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rendezvous: file store set %q: %w", key, err)
	}
	return nil
}

// Get implements transport.Store, polling with backoff (1 ms up to 100 ms) until the
// key's file appears or ctx ends.
func (s *FileStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.check("get", key); err != nil {
		return nil, err
	}
	wait := time.Millisecond
	for {
		v, err := os.ReadFile(s.path(key))
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("rendezvous: file store get %q: %w", key, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("rendezvous: file store %s: waiting for key %q: %w", s.dir, key, ctxErr(ctx))
		case <-time.After(wait):
		}
		if err := s.check("get", key); err != nil {
			return nil, err
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Add implements transport.Store.
func (s *FileStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := s.check("add", key); err != nil {
		return 0, err
	}
	var sum int64
	err := s.locked(ctx, func() error {
		v, err := os.ReadFile(s.path(key))
		switch {
		case err == nil:
			n, perr := strconv.ParseInt(string(v), 10, 64)
			if perr != nil {
				return fmt.Errorf("rendezvous: file store add %q: %w: value %q is not an integer", key, transport.ErrInvalid, v)
			}
			sum = n
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("rendezvous: file store add %q: %w", key, err)
		}
		sum += delta
		return s.write(key, []byte(strconv.FormatInt(sum, 10)))
	})
	return sum, err
}

// Delete implements transport.Store.
func (s *FileStore) Delete(ctx context.Context, key string) error {
	if err := s.check("delete", key); err != nil {
		return err
	}
	return s.locked(ctx, func() error {
		if err := os.Remove(s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rendezvous: file store delete %q: %w", key, err)
		}
		return nil
	})
}

// locked runs f holding the directory's flock. A blocking flock cannot be cancelled,
// so it polls LOCK_NB with backoff and honours ctx.
func (s *FileStore) locked(ctx context.Context, f func() error) error {
	fd, err := unix.Open(s.lock, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("rendezvous: file store lock %s: %w", s.lock, err)
	}
	defer unix.Close(fd)
	wait := 100 * time.Microsecond
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("rendezvous: file store lock %s: %w", s.lock, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rendezvous: file store lock %s: %w", s.lock, ctxErr(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	return f()
}

// Close makes later calls fail with ErrClosed; the files stay for other ranks.
func (s *FileStore) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

var _ transport.Store = (*FileStore)(nil)
