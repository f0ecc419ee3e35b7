package tune

import (
	"testing"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
	"github.com/stretchr/testify/require"
)

// TestAutoPicks: of each size's samples autoPicks keeps the one of the algorithm auto's
// model takes there, or all of them where that algorithm was not timed.
func TestAutoPicks(t *testing.T) {
	const world = 3
	m := algos.ShmModel
	pick := func(n int) string {
		a, _, err := algos.Resolve(algos.Auto, transport.KindAllReduce, n, world, m)
		require.NoError(t, err)
		return a.Name()
	}
	var pts, want []Point
	names := []string{"ring", "tree", "naive", "rd"}
	for i, n := range []int{64 << 10, 1 << 20, 32 << 20, 128 << 20} {
		for j, name := range names {
			p := Point{Algo: name, Bytes: n, Seconds: float64(i*10 + j + 1)}
			if i == 3 && name == pick(n) {
				continue // not timed at 128 MiB: every other sample stays
			}
			pts = append(pts, p)
			if i == 3 || name == pick(n) {
				want = append(want, p)
			}
		}
	}
	require.Equal(t, want, autoPicks(pts, m, world))
	require.Len(t, want, 3+3, "one pick at each of three sizes, three samples at the fourth")
}
