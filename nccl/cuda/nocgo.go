//go:build !(linux && cgo)

package cuda

import (
	"unsafe"

	"github.com/goccl/goccl/internal/dl"
)

// In builds without cgo, dl.Open always fails, so no Runtime exists and the primitives
// below are never reached; they return cudaErrorNotSupported to stay total.

func loadLib(s dl.Spec) (*dl.Lib, fns, error) {
	_, err := dl.Open(s)
	return nil, fns{}, err
}

const unsupported = ErrNotSupportedCode

func (r *Runtime) cInt(uintptr) (int, int)                                        { return 0, unsupported }
func (r *Runtime) cSetDevice(int) int                                             { return unsupported }
func (r *Runtime) cMalloc(int, int) (uintptr, int)                                { return 0, unsupported }
func (r *Runtime) cFree(int, uintptr) int                                         { return unsupported }
func (r *Runtime) cHostAlloc(int, int) (unsafe.Pointer, int)                      { return nil, unsupported }
func (r *Runtime) cFreeHost(unsafe.Pointer) int                                   { return unsupported }
func (r *Runtime) cHtoD(int, uintptr, []byte) int                                 { return unsupported }
func (r *Runtime) cDtoH(int, []byte, uintptr) int                                 { return unsupported }
func (r *Runtime) cCopy(int, uintptr, uintptr, int, MemcpyKind) int               { return unsupported }
func (r *Runtime) cCopyAsync(int, uintptr, uintptr, int, MemcpyKind, uintptr) int { return unsupported }
func (r *Runtime) cMemset(int, uintptr, byte, int) int                            { return unsupported }
func (r *Runtime) cCreate(int, uintptr, uint) (uintptr, int)                      { return 0, unsupported }
func (r *Runtime) cHandle(int, uintptr, uintptr) int                              { return unsupported }
func (r *Runtime) cHandle2(int, uintptr, uintptr, uintptr) int                    { return unsupported }
func (r *Runtime) cWaitEvent(int, uintptr, uintptr) int                           { return unsupported }
func (r *Runtime) cDeviceSync(int) int                                            { return unsupported }
func (r *Runtime) cElapsed(uintptr, uintptr) (float32, int)                       { return 0, unsupported }
func (r *Runtime) cPtrAttr(uintptr) (MemoryType, int, int)                        { return 0, 0, unsupported }
func (r *Runtime) cAttr(Attr, int) (int, int)                                     { return 0, unsupported }
func (r *Runtime) cPCIBusID(int) (string, int)                                    { return "", unsupported }
func (r *Runtime) cMemInfo(int) (uint64, uint64, int)                             { return 0, 0, unsupported }
func (r *Runtime) cErrStrings(int) (string, string)                               { return "", "" }
func (r *Runtime) cClearLast()                                                    {}

func pinnedSlice(unsafe.Pointer, int) []byte { return nil }
