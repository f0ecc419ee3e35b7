//go:build unix

package shmtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goccl/goccl/transport"
)

// FileStore is a transport.Store kept as one file per key in a directory. Set writes a
// temporary file and renames it, so a reader never sees half a value; Get polls.
// It is meant for tests on one machine, not for production rendezvous.
type FileStore struct {
	Dir string
}

// NewFileStore returns a store in dir, creating the directory if needed.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("shmtest: file store %s: %w", dir, err)
	}
	return &FileStore{Dir: dir}, nil
}

func (s *FileStore) path(key string) string { return filepath.Join(s.Dir, url.PathEscape(key)+".key") }

// Set stores value under key.
func (s *FileStore) Set(_ context.Context, key string, value []byte) error {
	tmp, err := os.CreateTemp(s.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("shmtest: set %q: %w", key, err)
	}
	_, werr := tmp.Write(value)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("shmtest: set %q: %w", key, err)
	}
	if err := os.Rename(tmp.Name(), s.path(key)); err != nil {
		return fmt.Errorf("shmtest: set %q: %w", key, err)
	}
	return nil
}

// Get waits until key exists or ctx ends.
func (s *FileStore) Get(ctx context.Context, key string) ([]byte, error) {
	for {
		b, err := os.ReadFile(s.path(key))
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("shmtest: get %q: %w", key, err)
		}
		select {
		case <-ctx.Done():
			err := ctx.Err()
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w: %w", transport.ErrTimeout, err)
			}
			return nil, fmt.Errorf("shmtest: waiting for key %q: %w", key, err)
		case <-time.After(time.Millisecond):
		}
	}
}

// Add adds delta to the decimal integer under key, holding an flock on the directory's
// lock file so concurrent processes do not lose updates.
func (s *FileStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	f, err := os.OpenFile(filepath.Join(s.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 0, fmt.Errorf("shmtest: add %q: %w", key, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("shmtest: add %q: lock: %w", key, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck
	var cur int64
	if b, err := os.ReadFile(s.path(key)); err == nil {
		cur, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("shmtest: add %q: %w: value %q is not an integer", key, transport.ErrInvalid, b)
		}
	}
	cur += delta
	return cur, s.Set(ctx, key, []byte(strconv.FormatInt(cur, 10)))
}

// Delete removes key; a missing key is not an error.
func (s *FileStore) Delete(_ context.Context, key string) error {
	if err := os.Remove(s.path(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("shmtest: delete %q: %w", key, err)
	}
	return nil
}

// Close does nothing: the directory belongs to the test.
func (s *FileStore) Close() error { return nil }
