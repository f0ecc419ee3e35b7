package goccl

import (
	"unsafe"

	"github.com/goccl/goccl/algos/reduce"
	"github.com/goccl/goccl/transport"
)

// DType is the element type of a collective's buffers.
type DType = transport.DType

// Op is a reduction operator.
type Op = transport.Op

// Buffer is host memory (a Go slice) or device memory (a CUDA pointer and a length).
type Buffer = transport.Buffer

// Kind names a collective.
type Kind = transport.Kind

// The element types.
const (
	Int8     = transport.Int8
	Uint8    = transport.Uint8
	Int32    = transport.Int32
	Uint32   = transport.Uint32
	Int64    = transport.Int64
	Uint64   = transport.Uint64
	Float16  = transport.Float16
	Float32  = transport.Float32
	Float64  = transport.Float64
	BFloat16 = transport.BFloat16
)

// The reduction operators.
const (
	Sum  = transport.Sum
	Prod = transport.Prod
	Max  = transport.Max
	Min  = transport.Min
	Avg  = transport.Avg
)

// The collective kinds, for Comm.Algo and per-collective config.
const (
	KindAllReduce     = transport.KindAllReduce
	KindReduce        = transport.KindReduce
	KindBroadcast     = transport.KindBroadcast
	KindAllGather     = transport.KindAllGather
	KindReduceScatter = transport.KindReduceScatter
	KindGather        = transport.KindGather
	KindScatter       = transport.KindScatter
	KindAllToAll      = transport.KindAllToAll
	KindBarrier       = transport.KindBarrier
	KindSendRecv      = transport.KindSendRecv
)

// Sentinel errors, re-exported from transport for errors.Is.
var (
	ErrNotSupported = transport.ErrNotSupported
	ErrClosed       = transport.ErrClosed
	ErrInvalid      = transport.ErrInvalid
	ErrMismatch     = transport.ErrMismatch
	ErrPeer         = transport.ErrPeer
	ErrTimeout      = transport.ErrTimeout
	ErrAuth         = transport.ErrAuth
)

// Half is an IEEE 754 binary16 value stored as its bit pattern (goccl.Float16 elements).
type Half uint16

// BF16 is a bfloat16 value stored as its bit pattern (goccl.BFloat16 elements).
type BF16 uint16

// Number is the set of Go element types the typed helpers accept.
type Number interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64 | Half | BF16
}

// DTypeOf returns the DType of the element type T.
func DTypeOf[T Number]() DType {
	var z T
	switch any(z).(type) {
	case int8:
		return Int8
	case uint8:
		return Uint8
	case int32:
		return Int32
	case uint32:
		return Uint32
	case int64:
		return Int64
	case uint64:
		return Uint64
	case float32:
		return Float32
	case float64:
		return Float64
	case Half:
		return Float16
	case BF16:
		return BFloat16
	}
	// Named types with these underlying types: decide by size and kind.
	return dtypeByShape(z)
}

func dtypeByShape[T Number](z T) DType {
	var probe T = 0
	probe--
	signed := probe < 0
	frac := T(1) / T(2)
	isFloat := frac != 0
	switch unsafe.Sizeof(z) {
	case 1:
		if signed {
			return Int8
		}
		return Uint8
	case 2:
		return Float16
	case 4:
		switch {
		case isFloat:
			return Float32
		case signed:
			return Int32
		}
		return Uint32
	default:
		switch {
		case isFloat:
			return Float64
		case signed:
			return Int64
		}
		return Uint64
	}
}

// Host wraps host memory as a Buffer.
func Host(b []byte) Buffer { return transport.HostBuffer(b) }

// HostSlice wraps a typed slice as a Buffer without copying.
func HostSlice[T Number](xs []T) Buffer {
	if len(xs) == 0 {
		return transport.HostBuffer([]byte{})
	}
	var z T
	return transport.HostBuffer(unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), len(xs)*int(unsafe.Sizeof(z))))
}

// DeviceBuffer wraps n bytes of CUDA device memory at ptr on device ordinal dev.
func DeviceBuffer(ptr uintptr, n, dev int) Buffer { return transport.DeviceBuffer(ptr, n, dev) }

// HalfFrom rounds f to the nearest float16 (ties to even).
func HalfFrom(f float32) Half { return Half(reduce.Float32ToFloat16(f)) }

// Float32 converts h exactly.
func (h Half) Float32() float32 { return reduce.Float16ToFloat32(uint16(h)) }

// BF16From rounds f to the nearest bfloat16 (ties to even).
func BF16From(f float32) BF16 { return BF16(reduce.Float32ToBFloat16(f)) }

// Float32 converts b exactly.
func (b BF16) Float32() float32 { return reduce.BFloat16ToFloat32(uint16(b)) }
