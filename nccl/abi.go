package nccl

import (
	"fmt"
	"math"

	"github.com/goccl/goccl/transport"
)

// Result is ncclResult_t.
type Result int

// The ncclResult_t values (nccl.h.in, 2.30.7). ncclNumResults grew across versions, so
// it is never used as a bound.
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6 // since 2.13
	InProgress         Result = 7 // since 2.14: nonblocking call not finished yet
	Timeout            Result = 8 // since 2.30
)

var resultNames = [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
	"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress", "ncclTimeout"}

func (r Result) String() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("ncclResult(%d)", int(r))
}

// Error is a failed NCCL call: the call, its ncclResult_t, the library's text for it and
// ncclGetLastError's message (the detail NCCL would log), when the library has it.
type Error struct {
	Call string
	Code Result
	Text string // ncclGetErrorString
	Last string // ncclGetLastError, since 2.13
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nccl: %s: %s (%d)", e.Call, e.Code, int(e.Code))
	if e.Text != "" {
		s += ": " + e.Text
	}
	if e.Last != "" {
		s += ": " + e.Last
	}
	return s
}

// Unwrap maps the result onto goccl's sentinels.
func (e *Error) Unwrap() error {
	switch e.Code {
	case InvalidArgument, InvalidUsage:
		return transport.ErrInvalid
	case RemoteError:
		return transport.ErrPeer
	case Timeout:
		return transport.ErrTimeout
	}
	return nil
}

// VersionCode encodes a version as NCCL_VERSION does (2.8.4 -> 2804, 2.18.0 -> 21800).
func VersionCode(major, minor, patch int) int {
	if major <= 2 && minor <= 8 {
		return major*1000 + minor*100 + patch
	}
	return major*10000 + minor*100 + patch
}

// DecodeVersion splits an ncclGetVersion code into major, minor, patch.
func DecodeVersion(code int) (major, minor, patch int) {
	if code >= 10000 {
		return code / 10000, (code % 10000) / 100, code % 100
	}
	return code / 1000, (code % 1000) / 100, code % 100
}

// VersionString formats a version code as "2.30.7".
func VersionString(code int) string {
	a, b, c := DecodeVersion(code)
	return fmt.Sprintf("%d.%d.%d", a, b, c)
}

// Versions at which features goccl uses appeared.
var (
	minVersion        = VersionCode(2, 7, 0)  // ncclSend/ncclRecv
	bf16Version       = VersionCode(2, 10, 3) // ncclBfloat16
	avgVersion        = VersionCode(2, 10, 0) // ncclAvg
	configVersion     = VersionCode(2, 14, 0) // ncclCommInitRankConfig, nonblocking comms
	configLayout      = VersionCode(2, 18, 0) // the ncclConfig_t prefix goccl mirrors
	nativeAllToAllVer = VersionCode(2, 28, 0) // ncclAlltoAll, ncclGather, ncclScatter
)

// ncclDataType_t and ncclRedOp_t values. goccl's transport.DType and transport.Op use
// the same numbers on purpose; dataType and redOp check rather than assume it.
const (
	ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64 = 0, 1, 2, 3, 4, 5
	ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16               = 6, 7, 8, 9
	ncclFloat8e4m3, ncclFloat8e5m2                                    = 10, 11
	ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg                      = 0, 1, 2, 3, 4
)

var dtypeMap = map[transport.DType]int{
	transport.Int8: ncclInt8, transport.Uint8: ncclUint8, transport.Int32: ncclInt32, transport.Uint32: ncclUint32,
	transport.Int64: ncclInt64, transport.Uint64: ncclUint64, transport.Float16: ncclFloat16,
	transport.Float32: ncclFloat32, transport.Float64: ncclFloat64, transport.BFloat16: ncclBfloat16,
}

var opMap = map[transport.Op]int{
	transport.Sum: ncclSum, transport.Prod: ncclProd, transport.Max: ncclMax, transport.Min: ncclMin, transport.Avg: ncclAvg,
}

// dataType maps d to NCCL's number, refusing types the loaded library predates.
func dataType(d transport.DType, version int) (int, error) {
	v, ok := dtypeMap[d]
	if !ok {
		return 0, fmt.Errorf("nccl: %w: unknown dtype %s", transport.ErrInvalid, d)
	}
	if v == ncclBfloat16 && version < bf16Version {
		return 0, fmt.Errorf("nccl: %w: bfloat16 needs NCCL >= 2.10.3, loaded %s", transport.ErrNotSupported, VersionString(version))
	}
	return v, nil
}

// redOp maps o to NCCL's number, refusing avg on libraries before 2.10.
func redOp(o transport.Op, version int) (int, error) {
	v, ok := opMap[o]
	if !ok {
		return 0, fmt.Errorf("nccl: %w: unknown op %s", transport.ErrInvalid, o)
	}
	if v == ncclAvg && version < avgVersion {
		return 0, fmt.Errorf("nccl: %w: avg needs NCCL >= 2.10, loaded %s", transport.ErrNotSupported, VersionString(version))
	}
	return v, nil
}

// UniqueIDBytes is NCCL_UNIQUE_ID_BYTES: ncclUniqueId is 128 opaque bytes, passed by
// value to ncclCommInitRank.
const UniqueIDBytes = 128

// UniqueID is an ncclUniqueId.
type UniqueID [UniqueIDBytes]byte

// Undef is NCCL_CONFIG_UNDEF_INT (INT_MIN): "leave this ncclConfig_t field at NCCL's
// default". Zero is a real value for several fields, so unset fields must be Undef.
const Undef = math.MinInt32

// configMagic is NCCL_API_MAGIC, which ncclCommInitRankConfig checks.
const configMagic = 0xcafebeef

// configSize is sizeof the ncclConfig_t prefix goccl fills: the 2.18 layout (size,
// magic, version, blocking, cgaClusterSize, minCTAs, maxCTAs, netName, splitShare,
// trafficClass-or-padding). NCCL copies min(size, its own sizeof) bytes over its
// defaults, so this works on every library since 2.14 and leaves newer fields default.
const configSize = 48

// Config is the part of ncclConfig_t goccl sets. Fields left Undef (or "") keep NCCL's
// defaults (which NCCL_* environment variables may change).
type Config struct {
	Blocking       int // 1 = blocking calls, 0 = nonblocking (calls may return ncclInProgress)
	CGAClusterSize int
	MinCTAs        int
	MaxCTAs        int
	NetName        string // "IB", "Socket" or a plugin's name
	SplitShare     int
}

// DefaultConfig has every field unset.
func DefaultConfig() Config {
	return Config{Blocking: Undef, CGAClusterSize: Undef, MinCTAs: Undef, MaxCTAs: Undef, SplitShare: Undef}
}

// configFromParams reads Config from transport Params ("nccl.min_ctas", ...).
func configFromParams(p transport.Params) Config {
	c := DefaultConfig()
	c.Blocking = p.Int("nccl.blocking", 0) // nonblocking by default, so init and ops honour ctx
	c.CGAClusterSize = p.Int("nccl.cga_cluster_size", Undef)
	c.MinCTAs = p.Int("nccl.min_ctas", Undef)
	c.MaxCTAs = p.Int("nccl.max_ctas", Undef)
	c.SplitShare = p.Int("nccl.split_share", Undef)
	c.NetName = p.String("nccl.net_name", "")
	return c
}
