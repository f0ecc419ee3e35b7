package transporttest_test

import (
	"testing"

	"github.com/goccl/goccl/transport/inmem"
	"github.com/goccl/goccl/transport/transporttest"
)

// TestInmem holds the in-process transport to the same contract as the real ones.
func TestInmem(t *testing.T) {
	transporttest.Run(t, inmem.Transport{}, transporttest.Options{})
}
