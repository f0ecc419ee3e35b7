//go:build !(linux && cgo)

package nvrtc

import "github.com/goccl/goccl/internal/dl"

// Without cgo dl.Open always fails, so no Lib exists; these stay total.

const unsupported = errInternal

func loadLib(s dl.Spec) (*dl.Lib, fns, error) {
	_, err := dl.Open(s)
	return nil, fns{}, err
}

func (l *Lib) cVersion() (int, int, int)  { return 0, 0, unsupported }
func (l *Lib) cErrString(code int) string { return ResultName(code) }
func (l *Lib) cArchs() []int              { return nil }
func (l *Lib) cCompile(string, string, []string, bool) ([]byte, string, int) {
	return nil, "", unsupported
}
