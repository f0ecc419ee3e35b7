package perf

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWritePlot(t *testing.T) {
	var a, b Series
	a.Label, b.Label = "tcp/ring", "shm/tree"
	for s := int64(8); s <= 1<<20; s *= 4 {
		a.Points = append(a.Points, Point{Bytes: s, TimeUs: float64(s) / 1000, BusBW: float64(s) / 1e6})
		b.Points = append(b.Points, Point{Bytes: s, TimeUs: float64(s) / 3000, BusBW: float64(s) / 3e5})
	}
	a.Points = append(a.Points, Point{Bytes: 0, TimeUs: 1}) // size 0 is left out
	path := filepath.Join(t.TempDir(), "bw.png")
	require.NoError(t, WritePlot(path, "all_reduce_perf", []Series{a, b}))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Greater(t, img.Bounds().Dx(), 1000)

	err = WritePlot(filepath.Join(t.TempDir(), "x.png"), "x", []Series{{Label: "a", Points: []Point{{Bytes: 0}}}})
	require.ErrorContains(t, err, "no point with a size above 0")
}

func TestSizeLabels(t *testing.T) {
	require.Equal(t, "8B", sizeLabel(8))
	require.Equal(t, "1K", sizeLabel(1024))
	require.Equal(t, "64M", sizeLabel(64<<20))
	require.Equal(t, "2G", sizeLabel(2<<30))
	ticks := sizeTicks{}.Ticks(8, 128<<20)
	require.Equal(t, 8.0, ticks[0].Value)
	require.Equal(t, "8B", ticks[0].Label)
}
