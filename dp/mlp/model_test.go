package mlp

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// ref64 is an independent float64 forward and backward of the same network, written
// with plain loops: it returns the loss and the gradients of every tensor.
func ref64(dims []int, ws, bs [][]float32, x []float32, labels []int, n int) (float64, [][]float64, [][]float64) {
	L := len(dims) - 1
	acts := [][]float64{make([]float64, n*dims[0])}
	for i := range acts[0] {
		acts[0][i] = float64(x[i])
	}
	for l := range L {
		in, out := dims[l], dims[l+1]
		y := make([]float64, n*out)
		for i := range n {
			for o := range out {
				s := float64(bs[l][o])
				for k := range in {
					s += acts[l][i*in+k] * float64(ws[l][o*in+k])
				}
				if l < L-1 && s < 0 {
					s = 0
				}
				y[i*out+o] = s
			}
		}
		acts = append(acts, y)
	}
	c := dims[L]
	d := make([]float64, n*c)
	var loss float64
	for i := range n {
		row := acts[L][i*c : (i+1)*c]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(v - mx)
		}
		loss += math.Log(sum) + mx - row[labels[i]]
		for j, v := range row {
			d[i*c+j] = math.Exp(v-mx) / sum / float64(n)
		}
		d[i*c+labels[i]] -= 1 / float64(n)
	}
	gw, gb := make([][]float64, L), make([][]float64, L)
	for l := L - 1; l >= 0; l-- {
		in, out := dims[l], dims[l+1]
		gw[l], gb[l] = make([]float64, out*in), make([]float64, out)
		dx := make([]float64, n*in)
		for i := range n {
			for o := range out {
				g := d[i*out+o]
				gb[l][o] += g
				for k := range in {
					gw[l][o*in+k] += g * acts[l][i*in+k]
					dx[i*in+k] += g * float64(ws[l][o*in+k])
				}
			}
		}
		for i := range dx {
			if acts[l][i] <= 0 {
				dx[i] = 0
			}
		}
		d = dx
	}
	if n == 0 {
		return 0, gw, gb
	}
	return loss / float64(n), gw, gb
}

func TestGradientsMatchFloat64Reference(t *testing.T) {
	for _, c := range []struct {
		dims []int
		n    int
	}{{[]int{3, 2}, 1}, {[]int{7, 5, 3}, 4}, {[]int{9, 13, 6, 4}, 11}, {[]int{5, 4, 3}, 0}} {
		m, err := New(c.dims)
		require.NoError(t, err)
		data, err := NewSynthetic(c.dims[0], c.dims[len(c.dims)-1], 3)
		require.NoError(t, err)
		specs := m.Specs(5)
		ws, bs, gws, gbs := [][]float32{}, [][]float32{}, [][]float32{}, [][]float32{}
		for l := range m.Layers() {
			ws, bs = append(ws, specs[2*l].Init), append(bs, specs[2*l+1].Init)
			gws, gbs = append(gws, make([]float32, len(specs[2*l].Init))), append(gbs, make([]float32, len(specs[2*l+1].Init)))
			m.Bind(l, ws[l], bs[l])
			m.BindGrads(l, gws[l], gbs[l])
		}
		x, labels := make([]float32, c.n*c.dims[0]), make([]int, c.n)
		for i := range c.n {
			labels[i] = data.Sample(i, x[i*c.dims[0]:])
		}
		m.SetBatch(x, c.n)
		for l := range m.Layers() {
			m.Forward(l)
		}
		loss := m.Loss(labels, 1)
		for l := m.Layers() - 1; l >= 0; l-- {
			m.BackwardParams(l)
			m.BackwardInput(l)
		}
		wantLoss, wantW, wantB := ref64(c.dims, ws, bs, x, labels, c.n)
		require.InDelta(t, wantLoss, loss, 1e-5)
		for l := range m.Layers() {
			for i := range wantW[l] {
				require.InDelta(t, wantW[l][i], float64(gws[l][i]), 1e-5, "layer %d weight %d", l, i)
			}
			for i := range wantB[l] {
				require.InDelta(t, wantB[l][i], float64(gbs[l][i]), 1e-5, "layer %d bias %d", l, i)
			}
		}
	}
}

func TestBadModelAndData(t *testing.T) {
	_, err := New([]int{4})
	require.ErrorContains(t, err, "want at least an input and an output size")
	_, err = New([]int{4, 0, 2})
	require.ErrorContains(t, err, "layer size 0 at position 1")
	_, err = New([]int{4, 1})
	require.ErrorContains(t, err, "1 classes (want >= 2)")
	_, err = NewSynthetic(0, 3, 1)
	require.ErrorContains(t, err, "0 features")
	// Sizes whose product would overflow are an error, not a wrapped count.
	_, err = New([]int{4_000_000_000, 4_000_000_000, 2})
	require.ErrorContains(t, err, "more than 1099511627776 parameters")
	_, err = New([]int{1 << 41, 2})
	require.ErrorContains(t, err, "want 1..1099511627776")
	// The count is (in+1)*out per layer, as NumParams has it.
	for _, dims := range [][]int{{5, 4, 3}, {1, 2}, {784, 1024, 1024, 10}} {
		n, err := CountParams(dims)
		require.NoError(t, err)
		want := 0
		for l := 1; l < len(dims); l++ {
			want += dims[l-1]*dims[l] + dims[l]
		}
		require.Equal(t, want, n, dims)
		m, err := New(dims)
		require.NoError(t, err)
		require.Equal(t, want, m.NumParams())
	}
}

func TestSyntheticIsDeterministicByIndex(t *testing.T) {
	a, _ := NewSynthetic(6, 3, 9)
	b, _ := NewSynthetic(6, 3, 9)
	xa, xb := make([]float32, 6), make([]float32, 6)
	for _, i := range []int{5, 0, 1000, 5} {
		la, lb := a.Sample(i, xa), b.Sample(i, xb)
		require.Equal(t, la, lb)
		require.Equal(t, xa, xb)
		require.Less(t, la, 3)
	}
}

func TestLoadCSV(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	tab, err := LoadCSV(write("ok.csv", "f1,f2,label\n1,2,0\n3.5,-4,2\n"))
	require.NoError(t, err)
	require.Equal(t, 2, tab.Dim())
	require.Equal(t, 3, tab.Classes())
	x := make([]float32, 2)
	require.Equal(t, 2, tab.Sample(3, x), "row 3 mod 2 = 1")
	require.Equal(t, []float32{3.5, -4}, x)
	for _, c := range []struct{ body, want string }{
		{"1,2,0\n1,0\n", "line 2: 1 features (earlier rows have 2)"},
		{"1,x,0\n", `line 1 column 2: "x" is not a finite float32`},
		{"1,NaN,0\n", `line 1 column 2: "NaN" is not a finite float32`},
		{"f,g,l\n1,2,0\n-Inf,2,1\n", `line 3 column 1: "-Inf" is not a finite float32`},
		{"1,1e39,0\n", `"1e39" is not a finite float32`},
		{"1,2,-1\n", `label "-1" (want an integer class`},
		{"1,2,16777216\n", `label "16777216" (want an integer class 0, 1, ... below 16777216)`},
		{"1,2,9223372036854775807\n", `label "9223372036854775807"`},
		{"a,b\n", "no data rows"},
	} {
		_, err := LoadCSV(write("bad.csv", c.body))
		require.ErrorContains(t, err, c.want)
	}
	_, err = LoadCSV(filepath.Join(dir, "missing.csv"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
