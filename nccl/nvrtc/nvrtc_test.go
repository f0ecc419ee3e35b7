package nvrtc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/nccl/kernels/kerneltest"
	"github.com/goccl/goccl/nccl/nvrtc"
	"github.com/goccl/goccl/transport"
)

var fx *kerneltest.Fixture

func TestMain(m *testing.M) {
	fx = kerneltest.NewFixture()
	code := m.Run()
	fx.Close()
	os.Exit(code)
}

const src = `extern "C" __global__ void twice(float* x, long long n) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) x[i] *= 2.0f;
}
#ifdef GOCCL_HOST_SHIM
extern "C" const int twice__nargs = 2;
extern "C" void twice__host(void** p, goccl_dim3 g, goccl_dim3 b) { GOCCL_HOST_GRID(g, b) twice(*(float**)p[0], *(long long*)p[1]); }
#endif
`

func compiles(t *testing.T, log string) []string {
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "nvrtcCompileProgram ") {
			out = append(out, l)
		}
	}
	return out
}

func TestLoadMissing(t *testing.T) {
	_, err := nvrtc.Load("/nonexistent/libnvrtc.so.12")
	require.ErrorIs(t, err, transport.ErrNotSupported)
	if dl.Supported {
		require.Contains(t, err.Error(), "nvrtc.lib = /nonexistent/libnvrtc.so.12")
	}
	s := nvrtc.Spec("")
	s.SiteDirs = []string{t.TempDir()}
	for _, want := range []string{"libnvrtc.so.13", "libnvrtc.so.12", "nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"} {
		require.Contains(t, s.Searched(), want)
	}
	if _, err := nvrtc.Load(""); err != nil && dl.Supported {
		require.ErrorIs(t, err, transport.ErrNotSupported)
		require.Contains(t, err.Error(), "libnvrtc.so.13")
	}
}

func TestCompileCubinForTheArchAndCache(t *testing.T) {
	fx.FakeOnly(t)
	st, log := fx.Require(t)
	p, err := st.NVRTC.Compile(src, "twice.cu", 90, "--fmad=false")
	require.NoError(t, err)
	require.Equal(t, "cubin", p.Kind)
	require.Equal(t, []string{"--gpu-architecture=sm_90", "--fmad=false"}, p.Options)
	require.NotEmpty(t, p.Image)
	again, err := st.NVRTC.Compile(src, "twice.cu", 90, "--fmad=false")
	require.NoError(t, err)
	require.Same(t, p, again, "same source, arch and options: the cached program")
	other, err := st.NVRTC.Compile(src, "twice.cu", 80, "--fmad=false")
	require.NoError(t, err)
	require.NotSame(t, p, other)
	require.Equal(t, []string{"nvrtcCompileProgram name=twice.cu opts=--gpu-architecture=sm_90 --fmad=false ",
		"nvrtcCompileProgram name=twice.cu opts=--gpu-architecture=sm_80 --fmad=false "}, compiles(t, log))
	maj, mnr, err := st.NVRTC.Version()
	require.NoError(t, err)
	require.Equal(t, [2]int{12, 6}, [2]int{maj, mnr})
	require.Equal(t, []int{75, 80, 86, 89, 90}, st.NVRTC.SupportedArchs())
}

func TestPTXWithoutCubinSupport(t *testing.T) {
	fx.FakeOnly(t)
	st, log := fx.Require(t)
	old, err := nvrtc.Load(st.Libs.OldNVRTC)
	require.NoError(t, err)
	p, err := old.Compile(src, "twice.cu", 90)
	require.NoError(t, err)
	require.Equal(t, "ptx", p.Kind)
	require.Equal(t, []string{"--gpu-architecture=compute_90"}, p.Options)
	require.Len(t, compiles(t, log), 1, "straight to PTX: no CUBIN getter to try")
}

func TestCompileErrors(t *testing.T) {
	fx.FakeOnly(t)
	st, _ := fx.Require(t)
	_, err := st.NVRTC.Compile("extern \"C\" __global__ void bad( { syntax", "bad.cu", 90)
	var ce *nvrtc.CompileError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.Equal(t, 6, ce.Code)
	require.Contains(t, ce.Log, "error", "the compiler's log comes with the error")
	require.Contains(t, err.Error(), "bad.cu")

	t.Setenv("FAKE_NVRTC_MAXARCH", "80")
	_, err = st.NVRTC.Compile(src, "twice.cu", 90)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 5, ce.Code)
	require.Equal(t, []string{"--gpu-architecture=compute_90"}, ce.Options, "sm_90 was rejected, then compute_90")
	require.Contains(t, err.Error(), "this NVRTC supports [75 80]")
	t.Setenv("FAKE_NVRTC_MAXARCH", "")

	t.Setenv("FAKE_FAIL", "nvrtcCompileProgram=7")
	_, err = st.NVRTC.Compile(src+"// builtins\n", "twice.cu", 90)
	require.ErrorIs(t, err, transport.ErrNotSupported)
	require.Contains(t, err.Error(), "libnvrtc-builtins")
	t.Setenv("FAKE_FAIL", "")

	for _, c := range []struct {
		src  string
		arch int
		want string
	}{{src, 0, "architecture 0"}, {src, 9, "architecture 9"}, {"", 90, "empty source"}} {
		_, err := st.NVRTC.Compile(c.src, "x.cu", c.arch)
		require.ErrorIs(t, err, transport.ErrInvalid)
		require.ErrorContains(t, err, c.want)
	}
}

// TestBuiltinsLoadedFromTheSameDirectory: a libnvrtc next to a libnvrtc-builtins.so.*
// (as pip wheels ship them) loads the builtins first, with RTLD_GLOBAL.
func TestBuiltinsLoadedFromTheSameDirectory(t *testing.T) {
	fx.FakeOnly(t)
	st, _ := fx.Require(t)
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	builtins := filepath.Join(dir, "libnvrtc-builtins.so.12.6")
	c := filepath.Join(dir, "b.c")
	require.NoError(t, os.WriteFile(c, []byte("int goccl_fake_builtins_marker = 1;\n"), 0o644))
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", builtins, c).CombinedOutput()
	require.NoError(t, err, "%s", out)
	lib, err := os.ReadFile(st.Libs.NVRTC)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "libnvrtc.so.12"), lib, 0o755))
	l, err := nvrtc.Load(dir)
	require.NoError(t, err)
	require.Equal(t, builtins, l.Builtins())
	require.Equal(t, "", st.NVRTC.Builtins(), "no builtins next to the fakes' own libnvrtc")
}
