package dp

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Buckets follow PyTorch's rule: reverse registration order, the first closed at
// 1 MiB, later ones at 25 MiB; under ZeRO every unit is padded to a multiple of W.
func TestBucketAssignment(t *testing.T) {
	mib := 1 << 20 / 4 // float32 elements per MiB
	specs := []Spec{
		{Name: "emb", Len: 30 * mib, Layer: 0},
		{Name: "a.w", Len: 10 * mib, Layer: 1}, {Name: "a.b", Len: 3, Layer: 1},
		{Name: "b.w", Len: 10 * mib, Layer: 2}, {Name: "b.b", Len: 5, Layer: 2},
		{Name: "c.w", Len: mib / 2, Layer: 3}, {Name: "c.b", Len: 7, Layer: 3},
		{Name: "d.w", Len: mib / 2, Layer: 4}, {Name: "d.b", Len: 1, Layer: 4},
	}
	require.NoError(t, validateSpecs(specs))
	l := buildLayout(specs, 4, DefaultFirstBucketBytes, DefaultBucketBytes, false, false, 3)
	var got [][]int
	for _, u := range l.units {
		got = append(got, u.params)
	}
	// bucket 0: d.b, d.w, c.b, c.w reach 1 MiB at c.w; bucket 1: b.b .. a.w reach 25 MiB
	// only with a.w (20 MiB + a few elements < 25 MiB, so emb joins); the rest: none.
	require.Equal(t, [][]int{{5, 6, 7, 8}, {0, 1, 2, 3, 4}}, got)
	require.Equal(t, l.n, l.full, "DDP pads nothing")

	z := buildLayout(specs, 4, DefaultFirstBucketBytes, DefaultBucketBytes, true, true, 3)
	require.Len(t, z.units, 5, "ZeRO-3: one unit per layer")
	off := 0
	for ui := len(z.units) - 1; ui >= 0; ui-- {
		u := z.units[ui]
		require.Equal(t, 4-ui, u.layer)
		require.Equal(t, off, u.off, "units laid out in registration order")
		require.Zero(t, u.padded(3)%3)
		require.Less(t, u.padded(3)-u.n, 3)
		off += u.padded(3)
	}
	require.Equal(t, off, z.full)
	require.Equal(t, z.full/3, z.shard)
	for i := range specs {
		require.Equal(t, z.units[z.unitOf[i]].layer, specs[i].Layer, fmt.Sprint(i))
	}
}
