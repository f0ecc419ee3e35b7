package train

import (
	"math"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary command lines to goccl train's flag parser and what it
// accepts to the host-size check: errors, never a panic, and accepted flags inside
// the bounds the run relies on.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"--np 2 --zero 3 --steps 5", "--local 4 --dims 8,16,4 --bucket-mb 0.5",
		"--lr NaN", "--dims 4000000000,4000000000,2", "--bucket-mb 1e300", "--precision bf16 --accum 4", "-h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		o, err := parse(strings.Fields(line))
		if err != nil || o.help {
			return
		}
		if o.np < 0 || o.np > maxRanks || o.local < 0 || o.local > maxRanks || o.stage < 0 || o.stage > 3 ||
			!(o.bucketMB > 0 && o.bucketMB <= maxBucketMB) || !(o.firstMB > 0 && o.firstMB <= maxBucketMB) ||
			!(o.lr >= 0) || math.IsInf(o.lr, 0) || len(o.dims) < 1 {
			t.Fatalf("parse(%q) accepted %+v", line, *o)
		}
		if len(o.dims) >= 2 {
			_ = fitsHost(o.dims, 1<<35)
		}
	})
}
