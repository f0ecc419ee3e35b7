package rdma

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

func TestParseHCA(t *testing.T) {
	type probe struct {
		dev  string
		port int
		want bool
	}
	for _, tc := range []struct {
		in     string
		probes []probe
	}{
		{"", []probe{{"mlx5_0", 1, true}, {"anything", 7, true}}},
		{"mlx5_0:1,mlx5_1", []probe{{"mlx5_0", 1, true}, {"mlx5_0", 2, false}, {"mlx5_1", 2, true}, {"mlx5_10", 1, true}, {"mlx4_0", 1, false}}},
		{"mlx5", []probe{{"mlx5_0", 1, true}, {"mlx5_7", 2, true}, {"mlx4_0", 1, false}}},
		{"=mlx5_1", []probe{{"mlx5_1", 1, true}, {"mlx5_10", 1, false}}},
		{"^mlx5_0", []probe{{"mlx5_0", 1, false}, {"mlx5_1", 1, true}, {"mlx5_00", 1, false}}},
		{"^=mlx5_0:2", []probe{{"mlx5_0", 2, false}, {"mlx5_0", 1, true}, {"mlx5_00", 2, true}}},
		{" mlx5_0 : 1 ", nil}, // error below
	} {
		t.Run(tc.in, func(t *testing.T) {
			f, err := ParseHCA(tc.in)
			if tc.probes == nil {
				require.ErrorIs(t, err, transport.ErrInvalid)
				return
			}
			require.NoError(t, err)
			for _, p := range tc.probes {
				require.Equal(t, p.want, f.Match(p.dev, p.port), "%q matching %s:%d", tc.in, p.dev, p.port)
			}
			again, err := ParseHCA(f.String())
			require.NoError(t, err)
			require.Equal(t, f, again, "String round trip")
		})
	}
}

func TestParseHCAErrors(t *testing.T) {
	for in, want := range map[string]string{
		"^":          "no device names",
		"mlx5_0:0":   "ports are numbered 1..255",
		"mlx5_0:x":   "bad port",
		"mlx5_0,,x":  "bad device",
		"a:1:2":      "bad port",
		"mlx5_0:256": "1..255",
	} {
		_, err := ParseHCA(in)
		require.ErrorIs(t, err, transport.ErrInvalid, in)
		require.Contains(t, err.Error(), want, in)
	}
}

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions(nil)
	require.NoError(t, err)
	require.Equal(t, DefaultOptions(), o)
	o, err = ParseOptions(transport.Params{ParamHCA: "^mlx5_2", ParamGIDIndex: "3", ParamQPsPerPeer: "4", ParamProvider: "SOFT",
		ParamChunkBytes: "65536", ParamCredits: "16", "tcp.sockets": "9"})
	require.NoError(t, err)
	require.True(t, o.HCA.Exclude)
	require.Equal(t, 3, o.GIDIndex)
	require.Equal(t, 4, o.QPsPerPeer)
	require.Equal(t, "soft", o.Provider)
	require.Equal(t, 65536, o.ChunkBytes)
	require.Equal(t, 16, o.Credits)
	// rdma.chunk_bytes is spelled as every byte count (transport.ParseBytes).
	for v, want := range map[string]int{"64K": 65536, "1MiB": 1 << 20, " 8192 ": 8192, "4kb": 4096} {
		o, err = ParseOptions(transport.Params{ParamChunkBytes: v})
		require.NoError(t, err, v)
		require.Equal(t, want, o.ChunkBytes, v)
	}
	for _, tc := range []struct{ key, val, want string }{
		{ParamProvider, "rxe", "valid: auto, verbs, soft"},
		{ParamQPsPerPeer, "0", "[1, 16]"},
		{ParamGIDIndex, "-2", "[-1, 255]"},
		{ParamChunkBytes, "100", "[4096,"},
		{ParamChunkBytes, "1.5K", "want a byte count (4096, 64K, 1MiB) in [4096,"},
		{ParamChunkBytes, "lots", "want a byte count"},
		{ParamCredits, "many", "want an integer"},
		{"rdma.qps", "2", "unknown parameter"},
		{ParamHCA, "mlx5_0:0", `rdma: rdma.hca="mlx5_0:0": invalid argument: bad port "0" for device mlx5_0 in HCA list (ports are numbered 1..255)`},
		{ParamHCA, ",", `rdma.hca=","`},
	} {
		_, err := ParseOptions(transport.Params{tc.key: tc.val})
		require.ErrorIs(t, err, transport.ErrInvalid, "%s=%s", tc.key, tc.val)
		require.Contains(t, err.Error(), tc.want)
	}
}
