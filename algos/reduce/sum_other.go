//go:build !amd64

package reduce

import "github.com/goccl/goccl/transport"

// useAVX2 is always false off amd64; the generic kernels run.
var useAVX2 = false

func fast32(transport.Op, []float32, []float32, []float32) bool { return false }

func stream32(transport.Op, []float32, []float32, []float32) bool { return false }

func dual32(transport.Op, int, []float32, []float32, []float32, []float32) bool { return false }

func dual64(transport.Op, int, []float64, []float64, []float64, []float64) bool { return false }

func fastInt(transport.DType, transport.Op, []byte, []byte, []byte) int { return 0 }

func divide32([]float32, int) bool { return false }

func divide64([]float64, int) bool { return false }

func fast64(transport.Op, []float64, []float64, []float64) bool { return false }

var useF16C = false

func fastWiden(bool, []float32, []uint16) int { return 0 }

func fastNarrow(bool, []uint16, []float32) int { return 0 }

func dualHalf(transport.Op, bool, int, []uint16, []uint16, []uint16, []uint16) bool { return false }

func fastHalfSum(bool, []uint16, []uint16, []uint16) int { return 0 }
