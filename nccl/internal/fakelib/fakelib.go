// Package fakelib builds the fake libcudart.so.12 and libnccl.so.2 from
// nccl/testdata with the system C compiler, for the nccl and nccl/cuda tests. The
// fakes emulate CUDA and NCCL on host memory inside one process and log every call, so
// tests can check goccl's side of the ABI through the real loader and trampolines. They
// are a contract test, not evidence that NCCL works.
package fakelib

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Libs are the paths of the built fakes.
type Libs struct {
	Dir     string // holds libcudart.so.12 and libnccl.so.2 (NCCL 2.30.7)
	CUDA    string // Dir/libcudart.so.12
	NCCL    string // Dir/libnccl.so.2
	OldNCCL string // Dir/old/libnccl.so.2: NCCL 2.12.12, without 2.13+ symbols
}

// ErrNoCompiler means there is no C compiler, so tests must skip.
var ErrNoCompiler = errors.New("fakelib: no C compiler (cc) on PATH")

// Build compiles the fakes into dir.
func Build(dir string) (Libs, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return Libs{}, ErrNoCompiler
	}
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "..", "testdata")
	l := Libs{Dir: dir, CUDA: filepath.Join(dir, "libcudart.so.12"), NCCL: filepath.Join(dir, "libnccl.so.2"),
		OldNCCL: filepath.Join(dir, "old", "libnccl.so.2")}
	if err := os.MkdirAll(filepath.Dir(l.OldNCCL), 0o755); err != nil {
		return Libs{}, err
	}
	base := []string{"-O1", "-Wall", "-shared", "-fPIC", "-I", src}
	steps := [][]string{
		append(append([]string{}, base...), "-Wl,-soname,libcudart.so.12", "-o", l.CUDA, filepath.Join(src, "fakecudart.c"), "-lpthread"),
		append(append([]string{}, base...), "-Wl,-soname,libnccl.so.2", "-Wl,-rpath,$ORIGIN", "-o", l.NCCL,
			filepath.Join(src, "fakenccl.c"), l.CUDA, "-lpthread"),
		append(append([]string{}, base...), "-DFAKE_OLD", "-Wl,-soname,libnccl.so.2", "-Wl,-rpath,$ORIGIN/..", "-o", l.OldNCCL,
			filepath.Join(src, "fakenccl.c"), l.CUDA, "-lpthread"),
	}
	for _, args := range steps {
		out, err := exec.Command(cc, args...).CombinedOutput()
		if err != nil {
			return Libs{}, fmt.Errorf("fakelib: cc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return l, nil
}
