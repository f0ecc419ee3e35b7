package perf

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccl/goccl"
	"github.com/stretchr/testify/require"
)

// runLocal runs one report on world goroutine ranks over the inmem transport and
// returns rank 0's output and every rank's exit status.
func runLocal(t *testing.T, world int, args ...string) (string, []int) {
	t.Helper()
	o, err := Parse(args)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	comms, err := goccl.InitLocal(ctx, world)
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	var out bytes.Buffer
	codes := make([]int, world)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			var w io.Writer = io.Discard
			if r == 0 {
				w = &out
			}
			_, codes[r] = runReport(ctx, c, o, combo{}, false, w, w)
		})
	}
	wg.Wait()
	return out.String(), codes
}

func TestInProcessEveryCollective(t *testing.T) {
	const world = 3
	for _, c := range Collectives {
		t.Run(c.Name, func(t *testing.T) {
			// Sizes 0, 1033, 2066, 3099: zero, odd, not divisible by 3; every type,
			// op and root.
			out, codes := runLocal(t, world, c.Name, "-b", "0", "-e", "4099", "-i", "1033", "-n", "2", "-w", "1",
				"-c", "1", "-d", "all", "-o", "all", "-r", "-1")
			require.Equal(t, []int{0, 0, 0}, codes, out)
			require.Contains(t, out, "# Out of bounds values : 0 OK\n")
			rows := parseRows(t, out)
			require.NotEmpty(t, rows)
			for _, r := range rows {
				require.Equal(t, "0", r.wrongOOP, "%+v", r)
				require.Equal(t, "0", r.wrIP, "%+v", r)
			}
			// 1 B, 1 KiB and a large size (1 MiB) in half precision.
			out, codes = runLocal(t, world, c.Name, "-b", "1", "-e", "1M", "-f", "1024", "-n", "1", "-w", "0", "-c", "1", "-d", "half")
			require.Equal(t, []int{0, 0, 0}, codes, out)
			rows = parseRows(t, out)
			require.Len(t, rows, 3)
			for _, r := range rows {
				require.Equal(t, "0", r.wrongOOP, "%+v", r)
				require.Equal(t, "0", r.wrIP, "%+v", r)
			}
		})
	}
}

func TestInProcessFaultHook(t *testing.T) {
	testFault = true
	defer func() { testFault = false }()
	out, codes := runLocal(t, 3, "reduce_scatter", "-b", "64", "-e", "256", "-f", "2", "-n", "1", "-w", "0", "-d", "bfloat16", "-o", "avg")
	require.Equal(t, []int{ExitWrongData, ExitWrongData, ExitWrongData}, codes, out)
	require.Contains(t, out, "# Out of bounds values : 6 FAILED\n")
	for _, r := range parseRows(t, out) {
		require.Equal(t, "1", r.wrongOOP)
	}
}

func TestInProcessNoCheck(t *testing.T) {
	out, codes := runLocal(t, 2, "broadcast", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-c", "0", "-r", "1")
	require.Equal(t, []int{0, 0}, codes)
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "           8") {
			line = l
		}
	}
	require.True(t, strings.HasSuffix(line, "    N/A"), "%q", line)
	require.Equal(t, 2, strings.Count(line, "N/A"))
	require.Contains(t, line, "     8             2     float    none       1")
}
