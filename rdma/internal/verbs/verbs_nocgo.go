//go:build !linux || !cgo

package verbs

import (
	"fmt"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

var errNoCgo = fmt.Errorf("verbs: %w: this binary was built without cgo (or not for Linux), so it cannot load %s", transport.ErrNotSupported, Library)

// Open fails: loading libibverbs needs cgo on Linux.
func Open(Selector) (rc.Device, error) { return nil, errNoCgo }

// Probe fails like Open.
func Probe() error { return errNoCgo }

// StatusString fails like Open.
func StatusString(int) (string, error) { return "", errNoCgo }

func loadFrom(names []string) error {
	return fmt.Errorf("verbs: %w: cannot load libibverbs (searched %s): built without cgo", transport.ErrNotSupported, searched(names))
}
