package nccl

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

// The expected numbers below are copied from reference/abi.md section 2 (nccl.h.in,
// NCCL 2.30.7), not derived from the code under test.

func TestVersionCodes(t *testing.T) {
	for _, tc := range []struct {
		a, b, c, code int
		s             string
	}{{2, 8, 4, 2804, "2.8.4"}, {2, 18, 0, 21800, "2.18.0"}, {2, 21, 5, 22105, "2.21.5"}, {2, 30, 7, 23007, "2.30.7"}, {2, 7, 8, 2708, "2.7.8"}} {
		require.Equal(t, tc.code, VersionCode(tc.a, tc.b, tc.c))
		a, b, c := DecodeVersion(tc.code)
		require.Equal(t, []int{tc.a, tc.b, tc.c}, []int{a, b, c})
		require.Equal(t, tc.s, VersionString(tc.code))
	}
}

func TestEnumsMatchNCCL(t *testing.T) {
	wantDT := map[transport.DType]int{transport.Int8: 0, transport.Uint8: 1, transport.Int32: 2, transport.Uint32: 3,
		transport.Int64: 4, transport.Uint64: 5, transport.Float16: 6, transport.Float32: 7, transport.Float64: 8, transport.BFloat16: 9}
	require.Len(t, wantDT, len(transport.DTypes))
	for d, v := range wantDT {
		got, err := dataType(d, 23007)
		require.NoError(t, err)
		require.Equal(t, v, got, "%s", d)
	}
	wantOp := map[transport.Op]int{transport.Sum: 0, transport.Prod: 1, transport.Max: 2, transport.Min: 3, transport.Avg: 4}
	require.Len(t, wantOp, len(transport.Ops))
	for o, v := range wantOp {
		got, err := redOp(o, 23007)
		require.NoError(t, err)
		require.Equal(t, v, got, "%s", o)
	}
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, []int{int(Success), int(UnhandledCudaError), int(SystemError),
		int(InternalError), int(InvalidArgument), int(InvalidUsage), int(RemoteError), int(InProgress), int(Timeout)})
	require.Equal(t, 10, ncclFloat8e4m3)
	require.Equal(t, 11, ncclFloat8e5m2)
}

func TestVersionGating(t *testing.T) {
	_, err := dataType(transport.BFloat16, VersionCode(2, 10, 2))
	require.ErrorIs(t, err, transport.ErrNotSupported)
	require.Contains(t, err.Error(), "2.10.3")
	_, err = dataType(transport.BFloat16, VersionCode(2, 10, 3))
	require.NoError(t, err)
	_, err = redOp(transport.Avg, VersionCode(2, 9, 9))
	require.ErrorIs(t, err, transport.ErrNotSupported)
	_, err = dataType(transport.DType(42), 23007)
	require.ErrorIs(t, err, transport.ErrInvalid)
	_, err = redOp(transport.Op(9), 23007)
	require.ErrorIs(t, err, transport.ErrInvalid)
}

func TestConfigConstants(t *testing.T) {
	require.Equal(t, 128, UniqueIDBytes)
	require.Equal(t, -2147483648, Undef)
	require.Equal(t, 0xcafebeef, configMagic)
	require.Equal(t, 48, configSize)      // sizeof the 2.18-2.25 layout
	require.Equal(t, 21800, configLayout) // version must be the layout's code, never higher
	c := DefaultConfig()
	require.Equal(t, Config{Blocking: Undef, CGAClusterSize: Undef, MinCTAs: Undef, MaxCTAs: Undef, SplitShare: Undef}, c)
	p := configFromParams(transport.Params{"nccl.min_ctas": "4", "nccl.max_ctas": "8", "nccl.net_name": "Socket"})
	require.Equal(t, Config{Blocking: 0, CGAClusterSize: Undef, MinCTAs: 4, MaxCTAs: 8, NetName: "Socket", SplitShare: Undef}, p)
}

func TestErrorMapping(t *testing.T) {
	for r, want := range map[Result]error{InvalidArgument: transport.ErrInvalid, InvalidUsage: transport.ErrInvalid,
		RemoteError: transport.ErrPeer, Timeout: transport.ErrTimeout} {
		require.ErrorIs(t, &Error{Call: "ncclX", Code: r}, want)
	}
	e := &Error{Call: "ncclAllReduce", Code: InvalidUsage, Text: "invalid usage", Last: "detail"}
	require.Equal(t, "nccl: ncclAllReduce: ncclInvalidUsage (5): invalid usage: detail", e.Error())
}

func TestDeviceStrings(t *testing.T) {
	require.Equal(t, "[0000:18:00] NVIDIA H200", FormatDevice(0, 0x18, 0, "NVIDIA H200"))
	require.Equal(t, "[0001:af:1f] NVIDIA H100 80GB HBM3", FormatDevice(1, 0xaf, 0x1f, "NVIDIA H100 80GB HBM3"))
	for _, tc := range []struct {
		in        string
		d, b, dev uint32
	}{{"0000:18:00.0", 0, 0x18, 0}, {"00000000:AF:1F.0", 0, 0xaf, 0x1f}, {"0001:3b:00.1\x00", 1, 0x3b, 0}} {
		d, b, dev, err := ParseBusID(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, []uint32{tc.d, tc.b, tc.dev}, []uint32{d, b, dev}, tc.in)
	}
	for _, bad := range []string{"", "18:00.0", "zz:18:00.0"} {
		_, _, _, err := ParseBusID(bad)
		require.Error(t, err, bad)
	}
}

func TestHandleRoundTrip(t *testing.T) {
	e := &endpoint{local: transport.Local{CommID: "job/a/b", Rank: 3}, busID: "0000:18:00.0"}
	ph, err := parseHandle(e.Handle())
	require.NoError(t, err)
	require.Equal(t, peerHandle{comm: "job/a/b", rank: 3, dev: 0, busID: "0000:18:00.0"}, ph)
	for _, bad := range []string{"", "tcp/1/x/0/0/y", "nccl/9/x/0/0/y", "nccl/1/x/a/0/y"} {
		_, err := parseHandle([]byte(bad))
		require.ErrorIs(t, err, transport.ErrProtocol, bad)
	}
	require.ErrorIs(t, e.CanConnect(transport.PeerInfo{Rank: 1, Handle: []byte("nccl/1/other/1/0/x")}), transport.ErrProtocol)
	require.NoError(t, e.CanConnect(transport.PeerInfo{Rank: 1, Handle: []byte("nccl/1/job/a/b/1/0/x")}))
}
