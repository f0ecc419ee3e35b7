// Package kerneltest builds and loads the fake CUDA stack that goccl's kernel,
// NVRTC, cuBLAS and dp/cuda tests run on where there is no GPU: the nccl package's
// fake libcudart (host memory as "device memory", in-order streams) plus a fake
// libcuda (driver API), libnvrtc and libcublas from nccl/testdata. The fake NVRTC
// compiles goccl's generated kernel source with the host C++ compiler under a small
// CUDA-compatibility header, and the fake driver runs each launch one thread at a
// time, so the very source NVRTC gets on a GPU is executed and checked against host
// references. It is a contract test of goccl's side — argument order, per-thread
// device and context handling, error translation — and of the kernels' arithmetic;
// it says nothing about real GPU timing or about CUDA's own correctness.
package kerneltest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/nccl/cublas"
	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/nccl/internal/fakelib"
	"github.com/goccl/goccl/nccl/nvrtc"
)

// Libs are the built fakes.
type Libs struct {
	fakelib.Libs
	Driver   string // Dir/libcuda.so.1
	NVRTC    string // Dir/libnvrtc.so.12
	OldNVRTC string // Dir/old/libnvrtc.so.12, without nvrtcGetCUBIN (PTX only)
	CUBLAS   string // Dir/libcublas.so.12
	Work     string // where the fake NVRTC puts its compiled kernels
}

// ForProcesses builds the fakes into a test's temporary directory for tests that start
// goccl as processes, skipping the test where no library can be loaded (no cgo) or
// there is no compiler, and returns the environment that points those processes at the
// fakes (GOCCL_NCCL_LIB, GOCCL_CUDA_LIB, GOCCL_CUDA_DRIVER, GOCCL_CUDA_NVRTC,
// GOCCL_CUDA_CUBLAS), as NAME=value entries.
func ForProcesses(t testing.TB) []string {
	t.Helper()
	if !dl.Supported {
		t.Skip("built without cgo: libraries cannot be loaded")
	}
	l, err := Build(t.TempDir())
	if errors.Is(err, ErrNoCompiler) {
		t.Skip("no C compiler: cannot build the fake NCCL and CUDA libraries")
	}
	if err != nil {
		t.Fatal(err)
	}
	return []string{"GOCCL_NCCL_LIB=" + l.NCCL, "GOCCL_CUDA_LIB=" + l.CUDA, "GOCCL_CUDA_DRIVER=" + l.Driver,
		"GOCCL_CUDA_NVRTC=" + l.NVRTC, "GOCCL_CUDA_CUBLAS=" + l.CUBLAS}
}

// ErrNoCompiler means there is no C/C++ compiler, so tests must skip.
var ErrNoCompiler = fakelib.ErrNoCompiler

// Build compiles every fake into dir.
func Build(dir string) (Libs, error) {
	base, err := fakelib.Build(dir)
	if err != nil {
		return Libs{}, err
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		return Libs{}, ErrNoCompiler
	}
	cxx, err := exec.LookPath("c++")
	if err != nil {
		return Libs{}, fmt.Errorf("%w (c++ is needed to run the kernels on the host)", ErrNoCompiler)
	}
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "..", "testdata")
	l := Libs{Libs: base, Driver: filepath.Join(dir, "libcuda.so.1"), NVRTC: filepath.Join(dir, "libnvrtc.so.12"),
		OldNVRTC: filepath.Join(dir, "old", "libnvrtc.so.12"), CUBLAS: filepath.Join(dir, "libcublas.so.12"),
		Work: filepath.Join(dir, "kernels")}
	if err := os.MkdirAll(l.Work, 0o755); err != nil {
		return Libs{}, err
	}
	shim, err := filepath.Abs(filepath.Join(src, "kernel_shim.h"))
	if err != nil {
		return Libs{}, err
	}
	common := []string{"-O1", "-Wall", "-shared", "-fPIC", "-I", src}
	defs := []string{fmt.Sprintf("-DFAKE_CXX=%q", cxx), fmt.Sprintf("-DFAKE_SHIM=%q", shim), fmt.Sprintf("-DFAKE_WORKDIR=%q", l.Work)}
	link := []string{base.CUDA, "-ldl", "-lpthread"}
	steps := [][]string{
		cat(common, []string{"-Wl,-soname,libcuda.so.1", "-Wl,-rpath,$ORIGIN", "-o", l.Driver, filepath.Join(src, "fakecuda.c")}, link),
		cat(common, defs, []string{"-Wl,-soname,libnvrtc.so.12", "-Wl,-rpath,$ORIGIN", "-o", l.NVRTC, filepath.Join(src, "fakenvrtc.c")}, link),
		cat(common, defs, []string{"-DFAKE_OLD", "-Wl,-soname,libnvrtc.so.12", "-Wl,-rpath,$ORIGIN/..", "-o", l.OldNVRTC, filepath.Join(src, "fakenvrtc.c")}, link),
		cat(common, []string{"-Wl,-soname,libcublas.so.12", "-Wl,-rpath,$ORIGIN", "-o", l.CUBLAS, filepath.Join(src, "fakecublas.c")}, link),
	}
	for _, args := range steps {
		out, err := exec.Command(cc, args...).CombinedOutput()
		if err != nil {
			return Libs{}, fmt.Errorf("kerneltest: cc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return l, nil
}

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Ordinal maps a test's device number onto the devices there are (the fakes have
// two; a real machine may have one).
func (s *Stack) Ordinal(i int) int {
	n, err := s.Runtime.DeviceCount()
	if err != nil || n < 1 {
		return i
	}
	return i % n
}

// Stack is the loaded fake CUDA stack.
type Stack struct {
	Libs    Libs
	Runtime *cuda.Runtime
	Driver  *cuda.Driver
	NVRTC   *nvrtc.Lib
	CUBLAS  *cublas.Lib
}

// Load loads every fake through goccl's real loaders.
func (l Libs) Load() (*Stack, error) {
	s := &Stack{Libs: l}
	var err error
	if s.Runtime, err = cuda.Load(l.CUDA); err != nil {
		return nil, err
	}
	if s.Driver, err = cuda.LoadDriver(l.Driver); err != nil {
		return nil, err
	}
	if s.NVRTC, err = nvrtc.Load(l.NVRTC); err != nil {
		return nil, err
	}
	if s.CUBLAS, err = cublas.Load(l.CUBLAS); err != nil {
		return nil, err
	}
	return s, nil
}

// Fixture builds the fakes once per test binary: call it from TestMain and use
// Require in tests.
type Fixture struct {
	dir   string
	libs  Libs
	err   error
	stack *Stack
	real  bool
}

// RealEnv is the environment variable that makes NewFixture load the real CUDA
// libraries (the default search) instead of building fakes: scripts/gpu-check.sh runs
// the compiled test binaries with GOCCL_GPU_CHECK=1 on a GPU machine, so the same tests
// check the kernels, cuBLAS and dp/cuda on real hardware. The fakes are never loaded
// in such a process: a real and a fake libcudart must not meet.
const RealEnv = "GOCCL_GPU_CHECK"

// NewFixture builds the fakes into a fresh temporary directory (or, with
// GOCCL_GPU_CHECK=1, loads the real libraries).
func NewFixture() *Fixture {
	f := &Fixture{}
	if os.Getenv(RealEnv) == "1" {
		f.real = true
		f.stack, f.err = loadReal()
		return f
	}
	if !dl.Supported {
		return f // nothing could load the fakes
	}
	f.dir, f.err = os.MkdirTemp("", "goccl-fakegpu-")
	if f.err == nil {
		f.libs, f.err = Build(f.dir)
	}
	if f.err == nil && dl.Supported {
		f.stack, f.err = f.libs.Load()
	}
	return f
}

func loadReal() (*Stack, error) {
	s := &Stack{}
	var err error
	if s.Runtime, err = cuda.Load(""); err != nil {
		return nil, err
	}
	if _, err = s.Runtime.DeviceCount(); err != nil {
		return nil, err
	}
	if s.Driver, err = cuda.LoadDriver(""); err != nil {
		return nil, err
	}
	if s.NVRTC, err = nvrtc.Load(""); err != nil {
		return nil, err
	}
	if s.CUBLAS, err = cublas.Load(""); err != nil {
		return nil, err
	}
	return s, nil
}

// Real reports whether the fixture holds the real libraries (GOCCL_GPU_CHECK=1).
func (f *Fixture) Real() bool { return f.real }

// FakeOnly skips a test that depends on the fakes' call log or failure injection.
func (f *Fixture) FakeOnly(t testing.TB) {
	t.Helper()
	if f.real {
		t.Skip("checks the fakes' call log or injected failures; not meaningful on a real GPU")
	}
}

// Close removes the fakes.
func (f *Fixture) Close() {
	if f.dir != "" {
		os.RemoveAll(f.dir)
	}
}

// Require returns the loaded stack, skipping the test when this build cannot load
// libraries (no cgo) or there is no compiler, and failing it on any other error. It
// points the fakes' call log at a fresh file, returned as the second value.
func (f *Fixture) Require(t testing.TB) (*Stack, string) {
	t.Helper()
	if !dl.Supported {
		t.Skip("built without cgo: libraries cannot be loaded")
	}
	if errors.Is(f.err, ErrNoCompiler) {
		t.Skip("no C/C++ compiler: cannot build the fake CUDA stack")
	}
	if f.err != nil {
		if f.real {
			t.Fatalf("real CUDA stack (%s=1): %v", RealEnv, f.err)
		}
		t.Fatalf("fake CUDA stack: %v", f.err)
	}
	log := filepath.Join(t.TempDir(), "calls.log")
	t.Setenv("FAKE_LOG", log)
	t.Setenv("FAKE_FAIL", "")
	return f.stack, log
}
