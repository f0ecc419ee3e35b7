package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mismatchBound is how long a rank may take to report a disagreement. The jobs run with
// GOCCL_TIMEOUT=60s, so meeting it proves detection does not wait for the timeout.
const mismatchBound = 10 * time.Second

// TestMismatch makes the last of 3 ranks deviate in the second of three calls (see
// rankprog's mismatch mode) over tcp and shm. Every rank must fail quickly with
// ErrMismatch, or with a peer failure naming the deviating rank, and at least one error
// must describe both sides (what this rank called, what the peer sent).
func TestMismatch(t *testing.T) {
	const w, odd = 3, 2
	cases := []struct {
		name string
		// both are the two descriptions some rank's error must contain; nil when the
		// deviation is only visible as a departed peer.
		both []string
		// orBoth is another pair that will do: where the deviation may first be seen
		// against the peer's next call (lastCall 3), the deviant's own call and that one.
		orBoth []string
		// lastCall is the latest call at which a rank may notice: the deviation is in
		// call 2, but a rank whose part of that call needs nothing from the deviant (the
		// root and first hop of a broadcast) completes it and fails on the next one.
		lastCall int
		// oddOK: the deviant itself completes (it made its calls and left).
		oddOK bool
	}{
		{name: "kind", both: []string{"allreduce float32 sum count=1000", "broadcast float32 count=1000 root=0"}, lastCall: 2},
		{name: "count", both: []string{"count=1000", "count=1001"}, lastCall: 2},
		{name: "dtype", both: []string{"allreduce float32", "allreduce int32"}, lastCall: 2},
		{name: "op", both: []string{"float32 sum", "float32 max"}, lastCall: 2},
		{name: "root", both: []string{"root=0", "root=1"}, orBoth: []string{"root=1", "allgather float32 count=1000"}, lastCall: 3},
		{name: "skip", both: []string{"allreduce float32 sum count=1000", "allgather float32 count=1000"}, lastCall: 3},
		{name: "skipsame", lastCall: 3, oddOK: true},
	}
	for _, tr := range transports {
		for _, c := range cases {
			t.Run(tr+"/"+c.name, func(t *testing.T) {
				res := job{n: w, env: []string{"GOCCL_TRANSPORT=" + tr, "GOCCL_TIMEOUT=60s"},
					args: []string{"-mode", "mismatch", "-case", c.name, "-odd", fmt.Sprint(odd)}, timeout: time.Minute}.run(t)
				require.Equal(t, 0, res.code, "%s", res)
				outs := records(res.stdout, "OUTCOME")
				require.Len(t, outs, w, "every rank must report\n%s", res)
				var errs []string
				for r, o := range outs {
					if r == odd && c.oddOK {
						require.Contains(t, o.line, " ok", "rank %d", r)
						continue
					}
					e := o.kv["err"]
					require.NotEmpty(t, e, "rank %d finished without an error: %s\n%s", r, o.line, res)
					require.LessOrEqual(t, o.int("ms"), int(mismatchBound.Milliseconds()), "rank %d waited: %s", r, o.line)
					require.Equal(t, "false", o.kv["timeout"], "rank %d timed out instead of detecting: %s", r, o.line)
					call := o.int("call")
					require.True(t, call >= 2 && call <= c.lastCall, "rank %d noticed at call %d: %s", r, call, o.line)
					if o.kv["mismatch"] != "true" {
						require.Equal(t, "true", o.kv["peer"], "rank %d: neither a mismatch nor a peer failure: %s", r, o.line)
						require.True(t, namesRank(e, odd), "rank %d's peer failure does not name rank %d: %s", r, odd, e)
					}
					errs = append(errs, e)
				}
				if c.both != nil {
					described := false
					for _, e := range errs {
						for _, pair := range [][]string{c.both, c.orBoth} {
							ok := pair != nil
							for _, s := range pair {
								ok = ok && strings.Contains(e, s)
							}
							described = described || ok
						}
					}
					require.True(t, described, "no error describes both sides %q (or %q):\n%s", c.both, c.orBoth, strings.Join(errs, "\n"))
				}
			})
		}
	}
}

// TestMismatchSkippedLastCall: the deviant never makes the last call but stays alive, so
// nothing can tell the others anything except the clock. They must end with a timeout
// error (GOCCL_TIMEOUT=3s) that names the rank they were waiting for, not hang.
func TestMismatchSkippedLastCall(t *testing.T) {
	const w, odd = 3, 2
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			res := job{n: w, env: []string{"GOCCL_TRANSPORT=" + tr, "GOCCL_TIMEOUT=3s"},
				args: []string{"-mode", "mismatch", "-case", "skiplast", "-odd", fmt.Sprint(odd)}, timeout: time.Minute}.run(t)
			require.Equal(t, 0, res.code, "%s", res)
			outs := records(res.stdout, "OUTCOME")
			require.Len(t, outs, w, "every rank must report\n%s", res)
			for r, o := range outs {
				if r == odd {
					require.Contains(t, o.line, " ok")
					continue
				}
				require.Equal(t, 3, o.int("call"), "rank %d: %s", r, o.line)
				require.Equal(t, "true", o.kv["timeout"], "rank %d: want a timeout error: %s", r, o.line)
				ms := o.int("ms")
				require.True(t, ms >= 2900 && ms < 3000+int(mismatchBound.Milliseconds()), "rank %d timed out after %d ms, want about 3000", r, ms)
				e := o.kv["err"]
				require.Contains(t, e, "allreduce", "rank %d: the timeout must say which operation: %s", r, e)
				require.True(t, namesRank(e, odd), "rank %d's timeout error does not name rank %d, which it was waiting for: %s", r, odd, e)
			}
		})
	}
}
