package rendezvous

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/goccl/goccl/transport"
)

// MemStore is an in-process Store for goroutine ranks and tests.
type MemStore struct {
	mu      sync.Mutex
	data    map[string][]byte
	changed chan struct{} // closed and replaced on every write
	closed  bool
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{data: map[string][]byte{}, changed: make(chan struct{})}
}

func (s *MemStore) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Set stores a copy of value under key.
func (s *MemStore) Set(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memstore: set %q: %w", key, transport.ErrClosed)
	}
	s.data[key] = append([]byte(nil), value...)
	s.notifyLocked()
	return nil
}

// Get waits for key to exist and returns a copy of its value.
func (s *MemStore) Get(ctx context.Context, key string) ([]byte, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("memstore: get %q: %w", key, transport.ErrClosed)
		}
		if v, ok := s.data[key]; ok {
			s.mu.Unlock()
			return append([]byte(nil), v...), nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("memstore: waiting for key %q: %w", key, waitErr(ctx))
		}
	}
}

// Add adds delta to the decimal integer stored under key.
func (s *MemStore) Add(_ context.Context, key string, delta int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("memstore: add %q: %w", key, transport.ErrClosed)
	}
	var cur int64
	if v, ok := s.data[key]; ok {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("memstore: add %q: %w: value %q is not an integer", key, transport.ErrInvalid, v)
		}
		cur = n
	}
	cur += delta
	s.data[key] = []byte(strconv.FormatInt(cur, 10))
	s.notifyLocked()
	return cur, nil
}

// Delete removes key.
func (s *MemStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.data, key)
	return nil
}

// Close makes every pending and later call fail with ErrClosed.
func (s *MemStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.notifyLocked()
	}
	return nil
}

func waitErr(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}
