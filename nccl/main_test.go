package nccl

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/nccl/internal/fakelib"
	"github.com/goccl/goccl/transport"
)

var (
	fakes    fakelib.Libs
	fakesErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "goccl-fakenccl-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakes, fakesErr = fakelib.Build(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// useFakes skips without a C compiler, points the fakes' call log at a fresh file and
// returns Params that load them.
func useFakes(t *testing.T, old bool) (transport.Params, string) {
	t.Helper()
	if !dl.Supported {
		t.Skip("built without cgo: libraries cannot be loaded")
	}
	if errors.Is(fakesErr, fakelib.ErrNoCompiler) {
		t.Skip("no C compiler: cannot build the fake libnccl/libcudart")
	}
	require.NoError(t, fakesErr)
	log := filepath.Join(t.TempDir(), "calls.log")
	t.Setenv("FAKE_LOG", log)
	t.Setenv("FAKE_FAIL", "")
	lib := fakes.NCCL
	if old {
		lib = fakes.OldNCCL
	}
	return transport.Params{"nccl.lib": lib, "cuda.lib": fakes.CUDA}, log
}

// calls returns the logged lines that start with fn.
func calls(t *testing.T, log, fn string) []string {
	t.Helper()
	f, err := os.Open(log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []string
	for s := bufio.NewScanner(f); s.Scan(); {
		if strings.HasPrefix(s.Text(), fn+" ") {
			out = append(out, s.Text())
		}
	}
	return out
}
