package goccl

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// selector wraps the algorithm spec of a communicator.
type selector struct {
	spec string
	// ADAPT: filled from package algos once its selection API lands.
}

func newSelector(spec string) (*selector, error) {
	return &selector{spec: spec}, nil
}

// pick returns the algorithm for one call; nil with no error means "offload it".
func (s *selector) pick(kind Kind, bytes, world int, off transport.Offloader) (algos.Algorithm, string, error) {
	return nil, "", fmt.Errorf("%w: algorithm selection not wired yet", transport.ErrNotSupported)
}

var _ = context.Background
