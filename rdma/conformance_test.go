package rdma

import (
	"testing"
	"time"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

// TestConformance holds the transport, on the software provider, to the contract every
// goccl transport keeps (goroutine ranks in this process; TestTwoProcesses covers
// separate processes).
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params transport.Params
		max    int
	}{
		{"default", transport.Params{ParamProvider: "soft"}, 64 << 20},
		// Small slots and two QPs: many chunks per message, striped over QPs, and
		// senders that run out of credits all the time. Two 4 KiB slots take two
		// unreceived messages of 4056 bytes (EagerBytes), less than the 16 KiB the
		// algorithms need (goccl.Init refuses such a link): a test of flow control only.
		{"small-slots-2qp", transport.Params{ParamProvider: "soft", ParamChunkBytes: "4096", ParamCredits: "2", ParamQPsPerPeer: "2"}, 4 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			transporttest.Run(t, Transport{}, transporttest.Options{Params: tc.params, MaxMessage: tc.max, Timeout: 60 * time.Second})
		})
	}
}

func TestConformanceAuth(t *testing.T) {
	transporttest.Run(t, Transport{}, transporttest.Options{Params: transport.Params{ParamProvider: "soft"},
		MaxMessage: 1 << 20, AuthToken: []byte("s3cret"), Worlds: []int{3}})
}
