package transport

import (
	"fmt"
	"strings"
)

// DType is the element type of a collective's buffers.
type DType uint8

// The element types, numbered as NCCL numbers them (ncclInt8 = 0 ... ncclBfloat16 = 9),
// so the nccl transport can pass them through unchanged.
const (
	Int8     DType = 0
	Uint8    DType = 1
	Int32    DType = 2
	Uint32   DType = 3
	Int64    DType = 4
	Uint64   DType = 5
	Float16  DType = 6
	Float32  DType = 7
	Float64  DType = 8
	BFloat16 DType = 9
)

// DTypes lists every element type, in NCCL's order.
var DTypes = []DType{Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64, BFloat16}

var dtypeNames = [...]string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16"}

var dtypeSizes = [...]int{1, 1, 4, 4, 8, 8, 2, 4, 8, 2}

// Valid reports whether d is one of the defined element types.
func (d DType) Valid() bool { return int(d) < len(dtypeNames) }

// Size is the width of one element in bytes (0 for an invalid type).
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeSizes[d]
}

// String is the lower-case name used in config and errors ("float32").
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return dtypeNames[d]
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == Float16 || d == Float32 || d == Float64 || d == BFloat16
}

// ParseDType accepts the names String returns plus the aliases nccl-tests and PyTorch
// use (half, float, double, bf16, fp16, fp32, fp64, int, char).
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "int8", "char":
		return Int8, nil
	case "uint8":
		return Uint8, nil
	case "int32", "int":
		return Int32, nil
	case "uint32":
		return Uint32, nil
	case "int64":
		return Int64, nil
	case "uint64":
		return Uint64, nil
	case "float16", "half", "fp16":
		return Float16, nil
	case "float32", "float", "fp32":
		return Float32, nil
	case "float64", "double", "fp64":
		return Float64, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	}
	return 0, fmt.Errorf("%w: unknown dtype %q (valid: %s)", ErrInvalid, s, strings.Join(dtypeNames[:], ", "))
}

// Op is a reduction operator.
type Op uint8

// The reduction operators, numbered as NCCL numbers them (ncclSum = 0 ... ncclAvg = 4).
const (
	Sum  Op = 0
	Prod Op = 1
	Max  Op = 2
	Min  Op = 3
	Avg  Op = 4
)

// Ops lists every reduction operator.
var Ops = []Op{Sum, Prod, Max, Min, Avg}

var opNames = [...]string{"sum", "prod", "max", "min", "avg"}

// Valid reports whether o is one of the defined operators.
func (o Op) Valid() bool { return int(o) < len(opNames) }

// String is the lower-case name used in config and errors ("sum").
func (o Op) String() string {
	if !o.Valid() {
		return fmt.Sprintf("op(%d)", uint8(o))
	}
	return opNames[o]
}

// ParseOp accepts sum, prod, max, min and avg (any case).
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown op %q (valid: %s)", ErrInvalid, s, strings.Join(opNames[:], ", "))
}
