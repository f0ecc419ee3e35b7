//go:build !(linux && cgo)

package cublas

import "github.com/goccl/goccl/internal/dl"

// Without cgo dl.Open always fails, so no Lib exists; these stay total.

const unsupported = statusNotSupported

func loadLib(s dl.Spec) (*dl.Lib, fns, error) {
	_, err := dl.Open(s)
	return nil, fns{}, err
}

func (l *Lib) cCreate(uintptr, int) (uintptr, int)           { return 0, unsupported }
func (l *Lib) cDestroy(uintptr, int, uintptr) int            { return unsupported }
func (l *Lib) cSetStream(uintptr, int, uintptr, uintptr) int { return unsupported }
func (l *Lib) cMathMode(uintptr, int, uintptr, int) int      { return unsupported }
func (l *Lib) cVersion(uintptr, int, uintptr) (int, int)     { return 0, unsupported }
func (l *Lib) cSgemm(uintptr, int, uintptr, int, int, int, int, int, float32, uintptr, int, uintptr, int, float32, uintptr, int) int {
	return unsupported
}
