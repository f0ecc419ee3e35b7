//go:build !(linux && cgo)

package nccl

import "github.com/goccl/goccl/internal/dl"

// Without cgo dl.Open always fails, so no Lib exists and these are never reached.

func loadLib(s dl.Spec) (*dl.Lib, nfns, error) {
	_, err := dl.Open(s)
	return nil, nfns{}, err
}

func (l *Lib) cVersion() (int, Result)       { return 0, InternalError }
func (l *Lib) cUniqueID() (UniqueID, Result) { return UniqueID{}, InternalError }
func (l *Lib) cInit(uintptr, int, int, UniqueID, int, *Config) (uintptr, Result, bool) {
	return 0, InternalError, false
}
func (l *Lib) cComm(uintptr, uintptr) Result           { return InternalError }
func (l *Lib) cCommInt(uintptr, uintptr) (int, Result) { return 0, InternalError }
func (l *Lib) cErrString(Result) string                { return "" }
func (l *Lib) cLastError(uintptr) string               { return "" }
func (l *Lib) cGroup([]groupOp) (Result, int)          { return InternalError, -1 }
