package cublas_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/nccl/cublas"
	"github.com/goccl/goccl/nccl/cuda"
	"github.com/goccl/goccl/nccl/kernels/kerneltest"
	"github.com/goccl/goccl/transport"
)

var fx *kerneltest.Fixture

func TestMain(m *testing.M) {
	fx = kerneltest.NewFixture()
	code := m.Run()
	fx.Close()
	os.Exit(code)
}

func TestLoadMissing(t *testing.T) {
	_, err := cublas.Load("/nonexistent/libcublas.so.12")
	require.ErrorIs(t, err, transport.ErrNotSupported)
	if dl.Supported {
		require.Contains(t, err.Error(), "cublas.lib = /nonexistent/libcublas.so.12")
	}
	s := cublas.Spec("")
	s.SiteDirs = []string{t.TempDir()}
	for _, want := range []string{"libcublas.so.13", "libcublas.so.12", "nvidia/cu13/lib", "nvidia/cublas/lib"} {
		require.Contains(t, s.Searched(), want)
	}
}

func bytesOf(xs []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), 4*len(xs))
}

func toDev(t *testing.T, dev cuda.Device, xs []float32) uintptr {
	p, err := dev.Malloc(4 * len(xs))
	require.NoError(t, err)
	t.Cleanup(func() { dev.Free(p) })
	require.NoError(t, dev.CopyHtoD(p, bytesOf(xs)))
	return p
}

// ref is column-major C = alpha op(A) op(B) + beta C in float64.
func ref(ta, tb cublas.Op, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, len(c))
	for i := range c {
		out[i] = float64(c[i])
	}
	for j := range n {
		for i := range m {
			var s float64
			for l := range k {
				ia, ib := i+l*lda, l+j*ldb
				if ta == cublas.Trans {
					ia = l + i*lda
				}
				if tb == cublas.Trans {
					ib = j + l*ldb
				}
				x, y := a[ia], b[ib]
				s += float64(x) * float64(y)
			}
			out[i+j*ldc] = float64(alpha)*s + float64(beta)*float64(c[i+j*ldc])
		}
	}
	return out
}

func TestSgemmAgainstFloat64(t *testing.T) {
	st, log := fx.Require(t)
	dev, err := st.Runtime.Device(st.Ordinal(1))
	require.NoError(t, err)
	h, err := st.CUBLAS.NewHandle(dev)
	require.NoError(t, err)
	defer h.Destroy()
	s, err := dev.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	require.NoError(t, h.SetStream(s))
	r := rand.New(rand.NewPCG(7, 8))
	for _, sz := range [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 4, 9}, {2, 3, 0}, {0, 3, 2}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, ta := range []cublas.Op{cublas.NoTrans, cublas.Trans} {
			for _, tb := range []cublas.Op{cublas.NoTrans, cublas.Trans} {
				ra, ca := m, k
				if ta == cublas.Trans {
					ra, ca = k, m
				}
				rb, cb := k, n
				if tb == cublas.Trans {
					rb, cb = n, k
				}
				lda, ldb, ldc := max(1, ra+1), max(1, rb+2), max(1, m+3) // padded leading dimensions
				rnd := func(n int) []float32 {
					xs := make([]float32, n)
					for i := range xs {
						xs[i] = float32(r.NormFloat64())
					}
					return xs
				}
				a, b, c := rnd(lda*max(ca, 1)), rnd(ldb*max(cb, 1)), rnd(ldc*max(n, 1))
				da, db, dc := toDev(t, dev, a), toDev(t, dev, b), toDev(t, dev, c)
				require.NoError(t, h.Sgemm(ta, tb, m, n, k, 0.5, da, lda, db, ldb, -2, dc, ldc))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				require.NoError(t, s.Synchronize(ctx))
				cancel()
				got := make([]float32, len(c))
				require.NoError(t, dev.CopyDtoH(bytesOf(got), dc))
				want := ref(ta, tb, m, n, k, 0.5, a, lda, b, ldb, -2, c, ldc)
				for i := range got {
					require.InDelta(t, want[i], float64(got[i]), 1e-4*(1+math.Abs(want[i])), "%v%v %v element %d", ta, tb, sz, i)
				}
			}
		}
	}
	if fx.Real() {
		return
	}
	require.Contains(t, readFile(t, log), "cublasSgemm_v2 dev=1 ta=1 tb=1 m=17 n=4 k=9 lda=10 ldb=6 ldc=20 alpha=0.5 beta=-2")
	v, err := h.Version()
	require.NoError(t, err)
	require.Equal(t, 120604, v)
	require.NoError(t, h.SetMathMode(cublas.PedanticMath))
}

func TestSgemmBadArguments(t *testing.T) {
	fx.FakeOnly(t)
	st, _ := fx.Require(t)
	dev, err := st.Runtime.Device(0)
	require.NoError(t, err)
	h, err := st.CUBLAS.NewHandle(dev)
	require.NoError(t, err)
	defer h.Destroy()
	for _, c := range []struct {
		ta, tb        cublas.Op
		m, n, k       int
		lda, ldb, ldc int
		want          string
	}{
		{cublas.NoTrans, cublas.NoTrans, 3, 2, 4, 2, 4, 3, "lda 2 for a stored A of 3 rows (want >= 3)"},
		{cublas.Trans, cublas.NoTrans, 3, 2, 4, 3, 4, 3, "lda 3 for a stored A of 4 rows (want >= 4)"},
		{cublas.NoTrans, cublas.Trans, 3, 2, 4, 3, 1, 3, "ldb 1 for a stored B of 2 rows (want >= 2)"},
		{cublas.NoTrans, cublas.NoTrans, 3, 2, 4, 3, 4, 2, "ldc 2 for C of 3 rows (want >= 3)"},
		{cublas.NoTrans, cublas.NoTrans, -1, 2, 4, 3, 4, 3, "m=-1"},
		{cublas.Op(2), cublas.NoTrans, 1, 1, 1, 1, 1, 1, "valid: NoTrans, Trans"},
	} {
		err := h.Sgemm(c.ta, c.tb, c.m, c.n, c.k, 1, 0, c.lda, 0, c.ldb, 0, 0, c.ldc)
		require.ErrorIs(t, err, transport.ErrInvalid)
		require.ErrorContains(t, err, c.want)
	}
	t.Setenv("FAKE_FAIL", "cublasSgemm_v2=13")
	err = h.Sgemm(cublas.NoTrans, cublas.NoTrans, 1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 1)
	var be *cublas.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, "CUBLAS_STATUS_EXECUTION_FAILED", be.Name)
	require.Contains(t, err.Error(), "cublasSgemm_v2(NN m=1 n=1 k=1 lda=1 ldb=1 ldc=1) on device 0")
	t.Setenv("FAKE_FAIL", "cublasCreate_v2=1")
	_, err = st.CUBLAS.NewHandle(dev)
	require.ErrorIs(t, err, transport.ErrNotSupported, "NOT_INITIALIZED: no usable GPU")
	t.Setenv("FAKE_FAIL", "")
	other, err := st.Runtime.Device(1)
	require.NoError(t, err)
	s, err := other.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	require.ErrorIs(t, h.SetStream(s), transport.ErrInvalid)
}

// TestDevicePerCall uses handles of both devices from many goroutines; the fake
// cuBLAS fails any call made while another device is current.
func TestDevicePerCall(t *testing.T) {
	fx.FakeOnly(t)
	st, _ := fx.Require(t)
	var hs []*cublas.Handle
	var cs []uintptr
	for ord := range 2 {
		dev, err := st.Runtime.Device(ord)
		require.NoError(t, err)
		h, err := st.CUBLAS.NewHandle(dev)
		require.NoError(t, err)
		defer h.Destroy()
		hs = append(hs, h)
		cs = append(cs, toDev(t, dev, []float32{0}))
	}
	one := [2]uintptr{toDev(t, hs[0].Device(), []float32{1}), toDev(t, hs[1].Device(), []float32{1})}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				d := (g + i) % 2
				mu.Lock() // a handle is used by one goroutine at a time
				err := hs[d].Sgemm(cublas.NoTrans, cublas.NoTrans, 1, 1, 1, 1, one[d], 1, one[d], 1, 1, cs[d], 1)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	for d := range 2 {
		got := []float32{0}
		require.NoError(t, hs[d].Device().CopyDtoH(bytesOf(got), cs[d]))
		require.Equal(t, float32(80), got[0], "device %d: 80 accumulations of 1*1", d)
	}
}

func readFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
