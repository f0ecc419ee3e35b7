package transport

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseBytes: any string either parses to a count in [0, 2^50] that reads back
// the same when written as digits, or is refused with the message every setting shows.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"0", "4096", "512K", "1.5M", "4MiB", "64kb", " 8 B", "1e3", "-1", "NaN", "0x10", "1.", ".5K", "2000000G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			if !strings.Contains(err.Error(), "is not a byte count") {
				t.Fatalf("ParseBytes(%q): unexpected error text %v", s, err)
			}
			return
		}
		if n < 0 || n > maxBytes {
			t.Fatalf("ParseBytes(%q) = %d, outside [0, 2^50]", s, n)
		}
		if back, err := ParseBytes(strconv.Itoa(n)); err != nil || back != n {
			t.Fatalf("ParseBytes(%q) = %d, but ParseBytes(%q) = %d, %v", s, n, strconv.Itoa(n), back, err)
		}
	})
}
