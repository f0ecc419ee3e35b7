package perf

import (
	"fmt"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Point is one size of a sweep (the out-of-place half), for the plot.
type Point struct {
	Bytes        int64
	TimeUs       float64
	AlgBW, BusBW float64
}

// Series is one transport/algorithm line of the plot.
type Series struct {
	Label  string // "tcp/ring"
	Points []Point
}

// sizeTicks labels a log2 size axis with binary units (8B, 1K, 64M).
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	first, last := int(math.Floor(math.Log2(lo))), int(math.Ceil(math.Log2(hi)))
	step := max(1, (last-first+9)/10) // at most about ten labels
	for e := first; e <= last; e++ {
		v := math.Exp2(float64(e))
		if v < lo || v > hi {
			continue
		}
		t := plot.Tick{Value: v}
		if (e-first)%step == 0 {
			t.Label = sizeLabel(int64(v))
		}
		ticks = append(ticks, t)
	}
	return ticks
}

func sizeLabel(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dG", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dK", b>>10)
	}
	return fmt.Sprintf("%dB", b)
}

// WritePlot draws busbw (left) and time (right, log scale) against size, one line per
// series, into a PNG file.
func WritePlot(path, title string, series []Series) error {
	bw, lat := plot.New(), plot.New()
	bw.Title.Text = title + ": bus bandwidth (out-of-place)"
	bw.X.Label.Text, bw.Y.Label.Text = "size (bytes)", "busbw (GB/s)"
	lat.Title.Text = title + ": time per operation (out-of-place)"
	lat.X.Label.Text, lat.Y.Label.Text = "size (bytes)", "time (us)"
	for _, p := range []*plot.Plot{bw, lat} {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, sizeTicks{}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
	}
	lat.Y.Scale, lat.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	drawn := 0
	var bwArgs, latArgs []any
	for _, s := range series {
		var b, t plotter.XYs
		for _, pt := range s.Points {
			if pt.Bytes <= 0 || pt.TimeUs <= 0 || math.IsInf(pt.BusBW, 0) || math.IsNaN(pt.BusBW) {
				continue // a log axis has no place for size 0
			}
			b = append(b, plotter.XY{X: float64(pt.Bytes), Y: pt.BusBW})
			t = append(t, plotter.XY{X: float64(pt.Bytes), Y: pt.TimeUs})
		}
		if len(b) == 0 {
			continue
		}
		drawn++
		bwArgs = append(bwArgs, s.Label, b)
		latArgs = append(latArgs, s.Label, t)
	}
	if drawn == 0 {
		return fmt.Errorf("perf: --plot %s: no point with a size above 0 to draw", path)
	}
	if err := plotutil.AddLinePoints(bw, bwArgs...); err != nil {
		return fmt.Errorf("perf: --plot: %w", err)
	}
	if err := plotutil.AddLinePoints(lat, latArgs...); err != nil {
		return fmt.Errorf("perf: --plot: %w", err)
	}
	img := vgimg.New(16*vg.Inch, 6*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	plots := [][]*plot.Plot{{bw, lat}}
	canvases := plot.Align(plots, tiles, dc)
	bw.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("perf: --plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("perf: --plot: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("perf: --plot: %w", err)
	}
	return nil
}
