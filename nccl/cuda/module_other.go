//go:build !(linux && cgo)

package cuda

import "github.com/goccl/goccl/internal/dl"

// Without cgo dl.Open always fails, so no Driver exists; these stay total.

func loadDriverLib(s dl.Spec) (*dl.Lib, drvFns, error) {
	_, err := dl.Open(s)
	return nil, drvFns{}, err
}

func (d *Driver) cInit() int                                            { return unsupported }
func (d *Driver) cVersion() (int, int)                                  { return 0, unsupported }
func (d *Driver) cDeviceCount() (int, int)                              { return 0, unsupported }
func (d *Driver) cAttr(int, int) (int, int)                             { return 0, unsupported }
func (d *Driver) cRetain(int) (uintptr, int)                            { return 0, unsupported }
func (d *Driver) cModuleLoad(uintptr, imageCopy) (uintptr, int, string) { return 0, unsupported, "" }
func (d *Driver) cGetFunction(uintptr, uintptr, string) (uintptr, int)  { return 0, unsupported }
func (d *Driver) cModuleUnload(uintptr, uintptr) int                    { return unsupported }
func (d *Driver) cLaunch(uintptr, uintptr, Dim3, Dim3, int, uintptr, []uint64) int {
	return unsupported
}
func (d *Driver) cErrStrings(int) (string, string) { return "", "" }

type imageCopy struct{}

func newImageCopy([]byte) imageCopy { return imageCopy{} }
func (imageCopy) free()             {}
