//go:build !(linux && cgo)

package dl

import (
	"fmt"

	"github.com/goccl/goccl/transport"
)

// Lib is an opened shared library (never produced by this build).
type Lib struct{}

// Supported reports whether this build can load libraries (linux with cgo).
const Supported = false

// Open always fails: loading C libraries needs cgo on linux.
func Open(s Spec) (*Lib, error) {
	return nil, fmt.Errorf("dl: %w: cannot load %s: this binary was built without cgo (or not for linux); rebuild with CGO_ENABLED=1",
		transport.ErrNotSupported, s.Name)
}

// Path is empty in this build.
func (l *Lib) Path() string { return "" }

// From is empty in this build.
func (l *Lib) From() string { return "" }

// Sym always fails in this build.
func (l *Lib) Sym(name string) (uintptr, error) {
	return 0, fmt.Errorf("dl: %w: %s: built without cgo", transport.ErrNotSupported, name)
}

// Syms always fails in this build.
func (l *Lib) Syms(required, optional map[string]*uintptr) error {
	return fmt.Errorf("dl: %w: built without cgo", transport.ErrNotSupported)
}

// Close does nothing in this build.
func (l *Lib) Close() error { return nil }
