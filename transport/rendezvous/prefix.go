package rendezvous

import (
	"context"

	"github.com/goccl/goccl/transport"
)

// Prefix scopes a Store: every key is prefixed with p + "/". Closing a Prefix does not
// close the underlying store.
type Prefix struct {
	P     string
	Store transport.Store
}

// WithPrefix returns s scoped under p.
func WithPrefix(s transport.Store, p string) *Prefix { return &Prefix{P: p, Store: s} }

func (x *Prefix) k(key string) string { return x.P + "/" + key }

// Set implements transport.Store.
func (x *Prefix) Set(ctx context.Context, key string, v []byte) error {
	return x.Store.Set(ctx, x.k(key), v)
}

// Get implements transport.Store.
func (x *Prefix) Get(ctx context.Context, key string) ([]byte, error) {
	return x.Store.Get(ctx, x.k(key))
}

// Add implements transport.Store.
func (x *Prefix) Add(ctx context.Context, key string, d int64) (int64, error) {
	return x.Store.Add(ctx, x.k(key), d)
}

// Delete implements transport.Store.
func (x *Prefix) Delete(ctx context.Context, key string) error {
	return x.Store.Delete(ctx, x.k(key))
}

// Close is a no-op: the underlying store belongs to whoever created it.
func (x *Prefix) Close() error { return nil }
