//go:build linux

package shm_test

import (
	"testing"
	"time"

	"github.com/goccl/goccl/shm"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// TestConformance holds shm to the transport contract, through the ring only (its
// payloads streamed in) and with single-copy for everything but tiny messages.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params transport.Params
	}{
		{"ring", transport.Params{"shm.single_copy": "false", "shm.stream_stores": "true", "shm.ring_bytes": "256K", "shm.chunk_bytes": "16K"}},
		{"singlecopy", transport.Params{"shm.single_copy": "true", "shm.single_copy_min": "17"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			transporttest.Run(t, shm.Transport{}, transporttest.Options{Params: tc.params, Timeout: 20 * time.Second})
		})
	}
}
