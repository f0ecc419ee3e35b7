package perf

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCountsForEveryCollective(t *testing.T) {
	// Worked by hand from nccl-tests' getCollByteCount: count = size/eltSize; the
	// per-rank tests use base = (count/n) rounded down to a multiple of 16 bytes.
	type want struct{ send, recv, param, sendIn, recvIn, bytes int64 }
	cases := []struct {
		coll       string
		size       int64
		elt, ranks int
		want       want
	}{
		{"all_reduce", 1000, 4, 3, want{250, 250, 250, 0, 0, 1000}},
		{"all_reduce", 7, 4, 3, want{1, 1, 1, 0, 0, 4}},
		{"all_reduce", 0, 4, 3, want{0, 0, 0, 0, 0, 0}},
		{"broadcast", 1001, 1, 3, want{1001, 1001, 1001, 0, 0, 1001}},
		{"reduce", 1000, 8, 3, want{125, 125, 125, 0, 0, 1000}},
		{"sendrecv", 33, 2, 5, want{16, 16, 16, 0, 0, 32}},
		// base = 250/3 = 83 -> 80 (multiple of 4 floats)
		{"all_gather", 1000, 4, 3, want{80, 240, 80, 80, 0, 960}},
		{"gather", 1000, 4, 3, want{80, 240, 80, 80, 0, 960}},
		{"reduce_scatter", 1000, 4, 3, want{240, 80, 80, 0, 80, 960}},
		{"scatter", 1000, 4, 3, want{240, 80, 80, 0, 80, 960}},
		{"alltoall", 1000, 4, 3, want{240, 240, 80, 0, 0, 960}},
		// doubles: base = 125/4 = 31 -> 30 (multiple of 2)
		{"all_gather", 1000, 8, 4, want{30, 120, 30, 30, 0, 960}},
		// int8: one element cannot be split, base 0
		{"reduce_scatter", 1, 1, 3, want{0, 0, 0, 0, 0, 0}},
		// half, 1 MiB over 3 ranks: 524288/3 = 174762 -> 174760 (multiple of 8)
		{"alltoall", 1 << 20, 2, 3, want{524280, 524280, 174760, 0, 0, 1048560}},
		{"all_gather", 128 << 20, 4, 1, want{32 << 20, 32 << 20, 32 << 20, 32 << 20, 0, 128 << 20}},
	}
	for _, c := range cases {
		coll, err := LookupCollective(c.coll)
		require.NoError(t, err)
		k := coll.CountsFor(c.size, c.elt, c.ranks)
		got := want{k.Send, k.Recv, k.Param, k.SendInplace, k.RecvInplace, k.Bytes(c.elt)}
		require.Equal(t, c.want, got, "%s size %d elt %d ranks %d", c.coll, c.size, c.elt, c.ranks)
	}
}

func TestBandwidthFactors(t *testing.T) {
	// algbw = bytes/1e9/sec with bytes = count*elt (times n for per-rank tests);
	// busbw factors from nccl-tests' doc/PERFORMANCE.md.
	cases := []struct {
		coll          string
		param         int64
		ranks         int
		alg, busRatio float64
	}{
		{"all_reduce", 250, 4, 1.0, 2 * 3.0 / 4},
		{"all_reduce", 250, 1, 1.0, 0},
		{"reduce_scatter", 80, 3, 0.96, 2.0 / 3},
		{"all_gather", 80, 3, 0.96, 2.0 / 3},
		{"alltoall", 80, 3, 0.96, 2.0 / 3},
		{"gather", 80, 3, 0.96, 2.0 / 3},
		{"scatter", 80, 3, 0.96, 2.0 / 3},
		{"broadcast", 250, 8, 1.0, 1},
		{"reduce", 250, 8, 1.0, 1},
		{"sendrecv", 250, 8, 1.0, 1},
	}
	for _, c := range cases {
		coll, err := LookupCollective(c.coll)
		require.NoError(t, err)
		alg, bus := coll.Bandwidth(Counts{Param: c.param}, 4, c.ranks, 1e-6)
		require.InDelta(t, c.alg, alg, 1e-12, c.coll)
		require.InDelta(t, c.alg*c.busRatio, bus, 1e-12, c.coll)
		require.InDelta(t, c.busRatio, coll.BusFactor(c.ranks), 1e-15, c.coll)
	}
}

func TestSweep(t *testing.T) {
	s, err := Sweep(8, 128<<20, 1<<20, 2)
	require.NoError(t, err)
	require.Len(t, s, 25)
	require.Equal(t, int64(8), s[0])
	require.Equal(t, int64(128<<20), s[24])
	for i := 1; i < len(s); i++ {
		require.Equal(t, 2*s[i-1], s[i])
	}

	s, err = Sweep(0, 4099, 1033, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1033, 2066, 3099}, s)

	s, err = Sweep(32<<20, 32<<20, 1<<20, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{32 << 20}, s)

	s, err = Sweep(0, 0, 0, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{0}, s)

	s, err = Sweep(0, 1<<20-1, 1, 1) // the longest sweep allowed
	require.NoError(t, err)
	require.Len(t, s, 1<<20)
	require.Equal(t, int64(1<<20-1), s[len(s)-1])

	s, err = Sweep(3, 100, 0, 3) // factor 3: 3 9 27 81
	require.NoError(t, err)
	require.Equal(t, []int64{3, 9, 27, 81}, s)

	for _, bad := range []struct {
		min, max, step, f int64
		msg               string
	}{
		{9, 8, 1, 2, "larger than maxbytes"},
		{0, 8, 1, 2, "never grows"},
		{1, 8, 0, 1, "never reaches"},
		{1, 1 << 30, 1, 1, "-b 1 -e 1073741824 -i 1 is 1073741824 sizes, more than 1048576"},
		{0, 1 << 20, 1, 0, "is 1048577 sizes"},
	} {
		_, err := Sweep(bad.min, bad.max, bad.step, bad.f)
		require.ErrorContains(t, err, bad.msg)
	}
}

func TestWarmupSizes(t *testing.T) {
	require.Equal(t, []int64{8, 16, 32, 64}, WarmupSizes(8, 100))
	require.Equal(t, []int64{0}, WarmupSizes(0, 100))
	require.Equal(t, []int64{1 << 20}, WarmupSizes(1<<20, 1<<20))
}

func TestLookupCollective(t *testing.T) {
	for _, name := range []string{"all_reduce", "all_reduce_perf", "allreduce", "all-reduce", "ALL_REDUCE"} {
		c, err := LookupCollective(name)
		require.NoError(t, err, name)
		require.Equal(t, "all_reduce_perf", c.Program())
	}
	_, err := LookupCollective("alltoallv")
	require.ErrorContains(t, err, `unknown collective "alltoallv" (valid: all_reduce, all_gather, broadcast, reduce_scatter, reduce, alltoall, scatter, gather, sendrecv)`)
}
