package cublas

import (
	"fmt"
	"os"
	"sync"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/transport"
)

type fns struct {
	create, destroy, setStream, sgemm, version uintptr
	mathMode, statusString                     uintptr // optional
}

// Lib is a loaded libcublas. It is safe for concurrent use; a Handle is not.
type Lib struct {
	lib  *dl.Lib
	f    fns
	path string
	from string
}

var (
	loadMu sync.Mutex
	loaded = map[string]*Lib{}
)

var (
	sonames   = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}
	wheelDirs = []string{"nvidia/cu13/lib", "nvidia/cublas/lib"}
	extraDirs = []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"}
)

// Spec describes where Load looks: path (a file or directory, from Params
// "cublas.lib") when set, else the system library path, the pip wheels'
// nvidia/cu13/lib and nvidia/cublas/lib, and the toolkit directories.
func Spec(path string) dl.Spec {
	s := dl.Spec{Name: "cuBLAS (libcublas)", Path: path, PathFrom: "cublas.lib", Sonames: sonames,
		WheelDirs: wheelDirs, ExtraDirs: extraDirs}
	if cp := os.Getenv("CONDA_PREFIX"); cp != "" {
		s.ExtraDirs = append([]string{cp + "/lib"}, s.ExtraDirs...)
	}
	return s
}

// Load opens libcublas (see Spec). A missing library or `_v2` symbol is an error
// wrapping transport.ErrNotSupported that says what was searched.
func Load(path string) (*Lib, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if l, ok := loaded[path]; ok {
		return l, nil
	}
	lib, f, err := loadLib(Spec(path))
	if err != nil {
		return nil, fmt.Errorf("cublas: %w", err)
	}
	l := &Lib{lib: lib, f: f, path: lib.Path(), from: lib.From()}
	loaded[path] = l
	return l, nil
}

// Path is the file libcublas was loaded from; From says which search step found it.
func (l *Lib) Path() string { return l.path }
func (l *Lib) From() string { return l.from }

// Op is cublasOperation_t.
type Op int

// Operations on a matrix operand.
const (
	NoTrans Op = 0 // CUBLAS_OP_N
	Trans   Op = 1 // CUBLAS_OP_T
)

func (o Op) String() string {
	switch o {
	case NoTrans:
		return "N"
	case Trans:
		return "T"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Math modes (cublasMath_t) for SetMathMode.
const (
	DefaultMath  = 0 // CUBLAS_DEFAULT_MATH: fp32 products in fp32
	PedanticMath = 2 // CUBLAS_PEDANTIC_MATH: no reduced-precision shortcuts at all
	TF32Math     = 3 // CUBLAS_TF32_TENSOR_OP_MATH: fp32 products on tensor cores in TF32
)

// Handle is a cuBLAS context on one device. It must be used from one goroutine at a
// time (cuBLAS handles are not thread-safe).
type Handle struct {
	l      *Lib
	dev    cuda.Device
	sd     uintptr
	h      uintptr
	stream uintptr
	once   sync.Once
}

// NewHandle creates a handle on dev (cublasCreate_v2 with dev selected).
func (l *Lib) NewHandle(dev cuda.Device) (*Handle, error) {
	if dev.Runtime() == nil {
		return nil, fmt.Errorf("cublas: %w: a handle needs a device from a loaded CUDA runtime", transport.ErrInvalid)
	}
	sd := dev.Runtime().SetDeviceFunc()
	h, code := l.cCreate(sd, dev.Ordinal())
	if code != statusSuccess {
		return nil, l.err("cublasCreate_v2", dev.Ordinal(), code, "")
	}
	return &Handle{l: l, dev: dev, sd: sd, h: h}, nil
}

// Device is the handle's device.
func (h *Handle) Device() cuda.Device { return h.dev }

// SetStream makes later calls queue their work on s (which must be on the handle's
// device); nil selects the legacy default stream.
func (h *Handle) SetStream(s *cuda.Stream) error {
	var sh uintptr
	if s != nil {
		if s.Device().Ordinal() != h.dev.Ordinal() {
			return fmt.Errorf("cublas: %w: stream of device %d for a handle on device %d", transport.ErrInvalid, s.Device().Ordinal(), h.dev.Ordinal())
		}
		sh = s.Handle()
	}
	if code := h.l.cSetStream(h.sd, h.dev.Ordinal(), h.h, sh); code != statusSuccess {
		return h.l.err("cublasSetStream_v2", h.dev.Ordinal(), code, "")
	}
	h.stream = sh
	return nil
}

// SetMathMode selects cuBLAS's math mode (DefaultMath, PedanticMath, TF32Math). It
// returns an error wrapping ErrNotSupported on a cuBLAS without cublasSetMathMode.
func (h *Handle) SetMathMode(mode int) error {
	if h.l.f.mathMode == 0 {
		return fmt.Errorf("cublas: %w: %s has no cublasSetMathMode", transport.ErrNotSupported, h.l.path)
	}
	if code := h.l.cMathMode(h.sd, h.dev.Ordinal(), h.h, mode); code != statusSuccess {
		return h.l.err("cublasSetMathMode", h.dev.Ordinal(), code, fmt.Sprintf("mode %d", mode))
	}
	return nil
}

// Version is the library's version (e.g. 120604 for cuBLAS 12.6.4).
func (h *Handle) Version() (int, error) {
	v, code := h.l.cVersion(h.sd, h.dev.Ordinal(), h.h)
	if code != statusSuccess {
		return 0, h.l.err("cublasGetVersion_v2", h.dev.Ordinal(), code, "")
	}
	return v, nil
}

// Sgemm queues C = alpha·op(A)·op(B) + beta·C on column-major float32 matrices in
// device memory: op(A) is m x k, op(B) is k x n, C is m x n, and lda, ldb, ldc are
// the leading dimensions (rows of the stored matrix). alpha and beta are host values.
func (h *Handle) Sgemm(ta, tb Op, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) error {
	if err := checkGemm(ta, tb, m, n, k, lda, ldb, ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	code := h.l.cSgemm(h.sd, h.dev.Ordinal(), h.h, int(ta), int(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	if code != statusSuccess {
		return h.l.err("cublasSgemm_v2", h.dev.Ordinal(), code, fmt.Sprintf("%s%s m=%d n=%d k=%d lda=%d ldb=%d ldc=%d", ta, tb, m, n, k, lda, ldb, ldc))
	}
	return nil
}

// checkGemm rejects what cuBLAS would answer with CUBLAS_STATUS_INVALID_VALUE, saying
// which argument is wrong and what it must be.
func checkGemm(ta, tb Op, m, n, k, lda, ldb, ldc int) error {
	if (ta != NoTrans && ta != Trans) || (tb != NoTrans && tb != Trans) {
		return fmt.Errorf("cublas: %w: operations %v, %v (valid: NoTrans, Trans)", transport.ErrInvalid, ta, tb)
	}
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("cublas: %w: sgemm sizes m=%d n=%d k=%d (want >= 0)", transport.ErrInvalid, m, n, k)
	}
	const maxInt32 = 1<<31 - 1
	if m > maxInt32 || n > maxInt32 || k > maxInt32 || lda > maxInt32 || ldb > maxInt32 || ldc > maxInt32 {
		return fmt.Errorf("cublas: %w: sgemm sizes beyond 32 bits (m=%d n=%d k=%d)", transport.ErrInvalid, m, n, k)
	}
	rowsA, rowsB := m, k
	if ta == Trans {
		rowsA = k
	}
	if tb == Trans {
		rowsB = n
	}
	switch {
	case lda < max(1, rowsA):
		return fmt.Errorf("cublas: %w: lda %d for a stored A of %d rows (want >= %d)", transport.ErrInvalid, lda, rowsA, max(1, rowsA))
	case ldb < max(1, rowsB):
		return fmt.Errorf("cublas: %w: ldb %d for a stored B of %d rows (want >= %d)", transport.ErrInvalid, ldb, rowsB, max(1, rowsB))
	case ldc < max(1, m):
		return fmt.Errorf("cublas: %w: ldc %d for C of %d rows (want >= %d)", transport.ErrInvalid, ldc, m, max(1, m))
	}
	return nil
}

// Destroy releases the handle; later calls do nothing.
func (h *Handle) Destroy() error {
	var err error
	h.once.Do(func() {
		if code := h.l.cDestroy(h.sd, h.dev.Ordinal(), h.h); code != statusSuccess {
			err = h.l.err("cublasDestroy_v2", h.dev.Ordinal(), code, "")
		}
	})
	return err
}

// Error is a failed cuBLAS call.
type Error struct {
	Call   string
	Device int
	Code   int // cublasStatus_t
	Name   string
	Detail string
}

func (e *Error) Error() string {
	s := "cublas: " + e.Call
	if e.Detail != "" {
		s += "(" + e.Detail + ")"
	}
	return s + fmt.Sprintf(" on device %d: %s (%d)", e.Device, e.Name, e.Code)
}

// Unwrap: NOT_INITIALIZED (no usable GPU or driver), ARCH_MISMATCH and NOT_SUPPORTED
// are ErrNotSupported; INVALID_VALUE is ErrInvalid.
func (e *Error) Unwrap() error {
	switch e.Code {
	case statusNotInitialized, statusArchMismatch, statusNotSupported:
		return transport.ErrNotSupported
	case statusInvalidValue:
		return transport.ErrInvalid
	}
	return nil
}

// cublasStatus_t values (reference/abi.md section 5.3).
const (
	statusSuccess        = 0
	statusNotInitialized = 1
	statusAllocFailed    = 3
	statusInvalidValue   = 7
	statusArchMismatch   = 8
	statusMappingError   = 11
	statusExecFailed     = 13
	statusInternalError  = 14
	statusNotSupported   = 15
	statusLicenseError   = 16
	setDevFailed         = 0x40000000
)

var statusNames = map[int]string{
	statusSuccess: "CUBLAS_STATUS_SUCCESS", statusNotInitialized: "CUBLAS_STATUS_NOT_INITIALIZED",
	statusAllocFailed: "CUBLAS_STATUS_ALLOC_FAILED", statusInvalidValue: "CUBLAS_STATUS_INVALID_VALUE",
	statusArchMismatch: "CUBLAS_STATUS_ARCH_MISMATCH", statusMappingError: "CUBLAS_STATUS_MAPPING_ERROR",
	statusExecFailed: "CUBLAS_STATUS_EXECUTION_FAILED", statusInternalError: "CUBLAS_STATUS_INTERNAL_ERROR",
	statusNotSupported: "CUBLAS_STATUS_NOT_SUPPORTED", statusLicenseError: "CUBLAS_STATUS_LICENSE_ERROR",
}

// StatusName is the cublasStatus_t name for code.
func StatusName(code int) string {
	if n, ok := statusNames[code]; ok {
		return n
	}
	return fmt.Sprintf("cublasStatus(%d)", code)
}

func (l *Lib) err(call string, dev, code int, detail string) error {
	if code&setDevFailed != 0 {
		code &^= setDevFailed
		return &cuda.Error{Call: "cudaSetDevice for " + call, Device: dev, Code: code}
	}
	return &Error{Call: call, Device: dev, Code: code, Name: StatusName(code), Detail: detail}
}
