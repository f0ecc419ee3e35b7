package nvrtc

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/transport"
)

// fns holds libnvrtc's entry points. The CUBIN getters (NVRTC >= 11.1) and the
// supported-architecture list (>= 11.2) are optional: without them Compile makes PTX.
type fns struct {
	version, create, compile, logSize, log, ptxSize, ptx, destroy, errStr uintptr
	cubinSize, cubin, numArchs, archs                                     uintptr
}

// Lib is a loaded libnvrtc. It is safe for concurrent use.
type Lib struct {
	lib      *dl.Lib
	f        fns
	path     string
	from     string
	builtins string // the libnvrtc-builtins file loaded next to it, if any

	mu    sync.Mutex
	cache map[string]*Program
}

var (
	loadMu sync.Mutex
	loaded = map[string]*Lib{}
)

// sonames and wheel directories, CUDA 13 first (reference/abi.md section 3.1).
var (
	sonames   = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}
	wheelDirs = []string{"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"}
	extraDirs = []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"}
)

// Spec describes where Load looks: path (a file or directory, from Params "nvrtc.lib")
// when set, else the system library path, the pip wheels and the toolkit directories.
func Spec(path string) dl.Spec {
	s := dl.Spec{Name: "NVRTC (libnvrtc)", Path: path, PathFrom: "nvrtc.lib", Sonames: sonames,
		WheelDirs: wheelDirs, ExtraDirs: extraDirs}
	if cp := os.Getenv("CONDA_PREFIX"); cp != "" {
		s.ExtraDirs = append([]string{cp + "/lib"}, s.ExtraDirs...)
	}
	return s
}

// Load opens libnvrtc (see Spec) and its builtins library. A missing library is an
// error wrapping transport.ErrNotSupported that lists where it looked. Loading the same
// path again returns the same Lib, and with it the same compile cache.
func Load(path string) (*Lib, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if l, ok := loaded[path]; ok {
		return l, nil
	}
	lib, f, err := loadLib(Spec(path))
	if err != nil {
		return nil, fmt.Errorf("nvrtc: %w", err)
	}
	l := &Lib{lib: lib, f: f, path: lib.Path(), from: lib.From(), cache: map[string]*Program{}}
	l.builtins = loadBuiltins(l.path)
	loaded[path] = l
	return l, nil
}

// loadBuiltins opens libnvrtc-builtins.so.* from libnvrtc's directory with RTLD_GLOBAL:
// NVRTC dlopens it by soname on first compile, which fails (NVRTC error 7) when the
// directory is not on the library path, as with pip wheels.
func loadBuiltins(libPath string) string {
	if !filepath.IsAbs(libPath) {
		return ""
	}
	ms, _ := filepath.Glob(filepath.Join(filepath.Dir(libPath), "libnvrtc-builtins.so.*"))
	sort.Sort(sort.Reverse(sort.StringSlice(ms)))
	for _, m := range ms {
		if b, err := dl.Open(dl.Spec{Name: "NVRTC builtins", Path: m, Global: true}); err == nil {
			return b.Path()
		}
	}
	return ""
}

// Path is the file libnvrtc was loaded from; From says which search step found it.
func (l *Lib) Path() string { return l.path }
func (l *Lib) From() string { return l.from }

// Builtins is the libnvrtc-builtins file loaded next to libnvrtc ("" if none was there).
func (l *Lib) Builtins() string { return l.builtins }

// Version is NVRTC's version (12, 6 for CUDA 12.6).
func (l *Lib) Version() (major, minor int, err error) {
	major, minor, code := l.cVersion()
	if code != success {
		return 0, 0, l.err("nvrtcVersion", code)
	}
	return major, minor, nil
}

// SupportedArchs lists the architectures this NVRTC compiles for (nil if it cannot say).
func (l *Lib) SupportedArchs() []int {
	if l.f.numArchs == 0 || l.f.archs == 0 {
		return nil
	}
	return l.cArchs()
}

// Program is compiled GPU code for one architecture.
type Program struct {
	// Image is what cuModuleLoadData takes: a CUBIN, or PTX text (NUL-terminated).
	Image []byte
	// Kind is "cubin" or "ptx".
	Kind string
	// Arch is the architecture number (90 = sm_90).
	Arch int
	// Options are the options it was compiled with.
	Options []string
	// Log is NVRTC's log (warnings), usually empty.
	Log string
}

// Compile compiles src for architecture arch (compute capability major*10+minor, 90 on
// an H200) with the extra NVRTC options opts, and returns the cached result when the
// same source, architecture and options were compiled before in this process. It asks
// for a CUBIN for sm_<arch> and falls back to PTX for compute_<arch> when this NVRTC
// cannot produce one. Kernels must be declared extern "C" to be found by name.
func (l *Lib) Compile(src, name string, arch int, opts ...string) (*Program, error) {
	if arch < 30 || arch > 1000 {
		return nil, fmt.Errorf("nvrtc: %w: architecture %d for %s (want compute capability major*10+minor, e.g. 90 for sm_90)", transport.ErrInvalid, arch, name)
	}
	if src == "" {
		return nil, fmt.Errorf("nvrtc: %w: empty source for %s", transport.ErrInvalid, name)
	}
	key := cacheKey(src, arch, opts)
	l.mu.Lock()
	defer l.mu.Unlock() // one compile at a time: concurrent callers of the same source wait for the first
	if p, ok := l.cache[key]; ok {
		return p, nil
	}
	p, err := l.compileArch(src, name, arch, opts)
	if err != nil {
		return nil, err
	}
	l.cache[key] = p
	return p, nil
}

// Cached is the number of programs in the cache (for tests and reports).
func (l *Lib) Cached() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.cache)
}

func cacheKey(src string, arch int, opts []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00", arch, strings.Join(opts, "\x00"))
	h.Write([]byte(src))
	return hex.EncodeToString(h.Sum(nil))
}

func (l *Lib) compileArch(src, name string, arch int, opts []string) (*Program, error) {
	wantCubin := l.f.cubinSize != 0 && l.f.cubin != 0
	if wantCubin {
		o := append([]string{fmt.Sprintf("--gpu-architecture=sm_%d", arch)}, opts...)
		img, log, code := l.cCompile(src, name, o, true)
		switch {
		case code == success && len(img) > 0:
			return &Program{Image: img, Kind: "cubin", Arch: arch, Options: o, Log: log}, nil
		case code != success && code != errInvalidOption:
			return nil, l.compileError(name, arch, o, code, log)
		}
		// No CUBIN (or sm_<arch> unknown to this NVRTC): try PTX for the virtual arch.
	}
	o := append([]string{fmt.Sprintf("--gpu-architecture=compute_%d", arch)}, opts...)
	img, log, code := l.cCompile(src, name, o, false)
	if code != success {
		return nil, l.compileError(name, arch, o, code, log)
	}
	return &Program{Image: img, Kind: "ptx", Arch: arch, Options: o, Log: log}, nil
}

func (l *Lib) compileError(name string, arch int, opts []string, code int, log string) error {
	e := &CompileError{Name: name, Arch: arch, Options: opts, Code: code, Text: l.cErrString(code), Log: strings.TrimSpace(log)}
	if code == errInvalidOption {
		if archs := l.SupportedArchs(); len(archs) > 0 {
			e.Supported = archs
		}
	}
	return e
}

// CompileError is a failed nvrtcCompileProgram (or nvrtcCreateProgram), with NVRTC's
// log, which names the line of the source that failed.
type CompileError struct {
	Name      string
	Arch      int
	Options   []string
	Code      int    // nvrtcResult
	Text      string // nvrtcGetErrorString
	Log       string
	Supported []int // architectures this NVRTC knows, when the option was rejected
}

func (e *CompileError) Error() string {
	s := fmt.Sprintf("nvrtc: compile %s for sm_%d %v: %s (%d)", e.Name, e.Arch, e.Options, e.text(), e.Code)
	if e.Code == errBuiltins {
		s += " (libnvrtc-builtins not found next to libnvrtc: install the matching nvidia-cuda-nvrtc wheel or toolkit)"
	}
	if len(e.Supported) > 0 {
		s += fmt.Sprintf("; this NVRTC supports %v", e.Supported)
	}
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

func (e *CompileError) text() string {
	if e.Text != "" {
		return e.Text
	}
	return ResultName(e.Code)
}

// Unwrap: a source or option NVRTC rejects is ErrInvalid; a broken installation
// (builtins missing) is ErrNotSupported.
func (e *CompileError) Unwrap() error {
	switch e.Code {
	case errBuiltins:
		return transport.ErrNotSupported
	case errInvalidInput, errInvalidProgram, errInvalidOption, errCompilation:
		return transport.ErrInvalid
	}
	return nil
}

// nvrtcResult values (reference/abi.md section 5.2).
const (
	success           = 0
	errOutOfMemory    = 1
	errCreation       = 2
	errInvalidInput   = 3
	errInvalidProgram = 4
	errInvalidOption  = 5
	errCompilation    = 6
	errBuiltins       = 7
	errInternal       = 11
)

var resultNames = map[int]string{
	success: "NVRTC_SUCCESS", errOutOfMemory: "NVRTC_ERROR_OUT_OF_MEMORY", errCreation: "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	errInvalidInput: "NVRTC_ERROR_INVALID_INPUT", errInvalidProgram: "NVRTC_ERROR_INVALID_PROGRAM",
	errInvalidOption: "NVRTC_ERROR_INVALID_OPTION", errCompilation: "NVRTC_ERROR_COMPILATION",
	errBuiltins: "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE", errInternal: "NVRTC_ERROR_INTERNAL_ERROR",
}

// ResultName is the nvrtcResult name for code.
func ResultName(code int) string {
	if n, ok := resultNames[code]; ok {
		return n
	}
	return fmt.Sprintf("nvrtcResult(%d)", code)
}

func (l *Lib) err(call string, code int) error {
	return fmt.Errorf("nvrtc: %s: %s (%d)", call, l.cErrString(code), code)
}
