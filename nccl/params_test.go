package nccl

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

// CheckParams refuses what ncclConfig_t would not take and keys nothing reads; the
// same values configFromParams turns into a Config.
func TestCheckParams(t *testing.T) {
	for _, tc := range []struct {
		p    transport.Params
		want string // "" = accepted
	}{
		{transport.Params{}, ""},
		{transport.Params{"nccl.min_ctas": "4", "nccl.max_ctas": "8", "nccl.net_name": "Socket", "nccl.blocking": "1"}, ""},
		{transport.Params{"nccl.device": " 3 ", "nccl.p2p_buffer": "pinned", "cuda.lib": "/x/libcudart.so.12"}, ""},
		{transport.Params{"nvrtc.lib": "/x/libnvrtc.so", "cublas.lib": "/x/libcublas.so", "cuda.driver": "/x/libcuda.so.1"}, ""},
		{transport.Params{"nccl.cga_cluster_size": "0", "nccl.split_share": "0"}, ""},
		{transport.Params{"tcp.sockets": "4", "local_rank": "1"}, ""}, // not nccl's keys
		{transport.Params{"nccl.min_cta": "4"}, `unknown parameter "nccl.min_cta"`},
		{transport.Params{"cuda.libs": "/x"}, `unknown parameter "cuda.libs"`},
		{transport.Params{"nccl.min_ctas": "four"}, `nccl.min_ctas="four", want an integer in [1,`},
		{transport.Params{"nccl.max_ctas": "0"}, `nccl.max_ctas="0"`},
		{transport.Params{"nccl.blocking": "2"}, `nccl.blocking="2", want an integer in [0, 1]`},
		{transport.Params{"nccl.cga_cluster_size": "9"}, `[0, 8]`},
		{transport.Params{"nccl.device": "-1"}, `nccl.device="-1"`},
		{transport.Params{"nccl.min_ctas": "16", "nccl.max_ctas": "8"}, "nccl.min_ctas=16 exceeds nccl.max_ctas=8"},
		{transport.Params{"nccl.p2p_buffer": "host"}, "valid: device, pinned"},
	} {
		err := Transport{}.CheckParams(tc.p)
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.p)
			continue
		}
		require.ErrorIs(t, err, transport.ErrInvalid, "%v", tc.p)
		require.Contains(t, err.Error(), tc.want)
	}
	c := configFromParams(transport.Params{"nccl.min_ctas": " 4", "nccl.blocking": "1 "})
	require.Equal(t, 4, c.MinCTAs)
	require.Equal(t, 1, c.Blocking)
}
