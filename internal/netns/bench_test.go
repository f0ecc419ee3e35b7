package netns_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/netns"
)

// TestBenchHosts measures float32-sum AllReduce busbw for ring, tree and hier on
// namespace hosts, for BENCHMARKS.md ("Scale on paper"). It only runs when NETNS_BENCH is set
// ("hosts x perHost" layouts, e.g. NETNS_BENCH="1x2 2x1 2x2 1x4 2x4 4x2"), because its
// figures are measurements, not checks:
//
//	NETNS_BENCH="1x2 2x1 2x2 1x4 2x4 4x2" go test -count=1 -run TestBenchHosts -v ./internal/netns
//
// NETNS_BENCH_SIZES and NETNS_BENCH_ITERS override the sizes (8,64K,1M,16M) and the
// timed iterations (10).
func TestBenchHosts(t *testing.T) {
	spec := os.Getenv("NETNS_BENCH")
	if spec == "" {
		t.Skip("skipping: set NETNS_BENCH (e.g. \"2x2\") to measure")
	}
	sizes := envOr("NETNS_BENCH_SIZES", "8,64K,1M,16M")
	iters := envOr("NETNS_BENCH_ITERS", "10")
	bench := regexp.MustCompile(`^BENCH `)
	for _, layout := range strings.Fields(spec) {
		var hosts, per int
		_, err := fmt.Sscanf(layout, "%dx%d", &hosts, &per)
		require.NoError(t, err, "layout %q: want HOSTSxPERHOST", layout)
		t.Run(layout, func(t *testing.T) {
			n := netns.ForTest(t, hosts)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			algs := "ring,tree,hier"
			ranks := cluster(t, ctx, n, per, []string{"GOCCL_TIMEOUT=120s"},
				"-mode=bench", "-sizes="+sizes, "-iters="+iters, "-algos="+algs)
			waitAll(t, ranks, 9*time.Minute)
			for _, p := range ranks {
				require.NoError(t, p.err, "rank %d: %v", p.r, p.output())
			}
			for _, l := range ranks[0].output() {
				if bench.MatchString(l) {
					fmt.Printf("layout=%s W=%d %s\n", layout, hosts*per, l)
				}
			}
		})
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
