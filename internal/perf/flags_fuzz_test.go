package perf

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary command lines (words split on spaces) to Parse: either a
// *UsageError, or options that name a collective and a sweep Sweep accepts; never a
// panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"all_reduce -b 8 -e 128M -f 2 -g 1", "allgather --np 4 --transport tcp --algo auto,ring",
		"broadcast -b8 -e8 -n 5 -w 1 -c 1 -o max -d all", "alltoall --minbytes=1K --maxbytes=1M -i 1024 -f 1",
		"reduce -I 1 -K 2 -n 3", "-h", "all_reduce -b 1 -e 1G -i 1 -f 1", "all_reduce -b -1", "-- all_reduce"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		o, err := Parse(strings.Fields(line))
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("Parse(%q): %v is not a usage error", line, err)
			}
			return
		}
		if o.Help {
			return
		}
		if o.Coll == nil {
			t.Fatalf("Parse(%q) names no collective", line)
		}
		sizes, err := Sweep(o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor)
		if err != nil || len(sizes) == 0 || len(sizes) > maxSweep {
			t.Fatalf("Parse(%q) passed a sweep of %d sizes: %v", line, len(sizes), err)
		}
	})
}
