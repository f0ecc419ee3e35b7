package dl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

func TestCandidatesOrder(t *testing.T) {
	site := t.TempDir()
	wheel := filepath.Join(site, "nvidia", "nccl", "lib", "libnccl.so.2")
	require.NoError(t, os.MkdirAll(filepath.Dir(wheel), 0o755))
	require.NoError(t, os.WriteFile(wheel, []byte("not an ELF"), 0o644))
	s := Spec{Name: "NCCL", Sonames: []string{"libnccl.so.2"}, WheelDirs: []string{"nvidia/nccl/lib", "nvidia/cu13/lib"}, SiteDirs: []string{site}}
	require.Equal(t, []Candidate{{Path: "libnccl.so.2", From: "system library path"}, {Path: wheel, From: "pip wheel in " + site}}, s.Candidates())
	require.Contains(t, s.Searched(), "nvidia/cu13/lib")

	// An explicit path is the only candidate, so a user never silently gets another library.
	s.Path, s.PathFrom = "/opt/x/libnccl.so.2", "nccl.lib"
	require.Equal(t, []Candidate{{Path: "/opt/x/libnccl.so.2", From: "nccl.lib"}}, s.Candidates())
	s.Path = filepath.Dir(wheel) // a directory: each soname inside it
	require.Equal(t, []Candidate{{Path: wheel, From: "nccl.lib"}}, s.Candidates())
}

func TestOpenErrors(t *testing.T) {
	if !Supported {
		_, err := Open(Spec{Name: "x"})
		require.ErrorIs(t, err, transport.ErrNotSupported)
		t.Skip("built without cgo")
	}
	site := t.TempDir()
	bad := filepath.Join(site, "nvidia", "nccl", "lib", "libgoccl-none.so.9")
	require.NoError(t, os.MkdirAll(filepath.Dir(bad), 0o755))
	require.NoError(t, os.WriteFile(bad, []byte("not an ELF"), 0o644))
	_, err := Open(Spec{Name: "Nothing", Sonames: []string{"libgoccl-none.so.9"}, WheelDirs: []string{"nvidia/nccl/lib"}, SiteDirs: []string{site}})
	require.ErrorIs(t, err, transport.ErrNotSupported)
	require.Contains(t, err.Error(), "Nothing not found")
	require.Contains(t, err.Error(), "libgoccl-none.so.9 (system library path)")
	require.Contains(t, err.Error(), bad)

	lib, err := Open(Spec{Name: "libm", Sonames: []string{"libm.so.6"}, SiteDirs: []string{}})
	require.NoError(t, err)
	require.Contains(t, lib.Path(), "libm")
	p, err := lib.Sym("cos")
	require.NoError(t, err)
	require.NotZero(t, p)
	_, err = lib.Sym("goccl_no_such_symbol")
	require.ErrorIs(t, err, transport.ErrNotSupported)
	var cosp, optp uintptr
	require.NoError(t, lib.Syms(map[string]*uintptr{"cos": &cosp}, map[string]*uintptr{"goccl_optional": &optp}))
	require.NotZero(t, cosp)
	require.Zero(t, optp)
	err = lib.Syms(map[string]*uintptr{"goccl_required": &optp}, nil)
	require.ErrorIs(t, err, transport.ErrNotSupported)
	require.Contains(t, err.Error(), "goccl_required")
}

// TestSiteDirsFromPythonOnPath: a virtual environment that is on PATH but not
// activated (no $VIRTUAL_ENV), as on a machine whose python3 is a venv's, still has its
// site-packages searched, found through the python3 link's prefix and not its target's
// alone.
func TestSiteDirsFromPythonOnPath(t *testing.T) {
	base, venv := t.TempDir(), t.TempDir()
	for _, d := range []string{base, venv} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "bin"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(d, "lib", "python3.12", "site-packages"), 0o755))
	}
	py := filepath.Join(base, "bin", "python3.12")
	require.NoError(t, os.WriteFile(py, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Symlink(py, filepath.Join(venv, "bin", "python3")))
	t.Setenv("PATH", filepath.Join(venv, "bin"))
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("CONDA_PREFIX", "")
	t.Setenv("PYTHONPATH", "")
	dirs := SiteDirs()
	require.Contains(t, dirs, filepath.Join(venv, "lib", "python3.12", "site-packages"))
	require.Contains(t, dirs, filepath.Join(base, "lib", "python3.12", "site-packages"))
}
