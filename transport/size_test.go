package transport

import (
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	good := map[string]int{
		"0": 0, "1": 1, "4096": 4096, " 77 ": 77, "8B": 8, "8b": 8,
		"512K": 512 << 10, "512k": 512 << 10, "64KiB": 64 << 10, "64kb": 64 << 10, "64 K": 64 << 10,
		"4M": 4 << 20, "4MiB": 4 << 20, "4mb": 4 << 20, "1.5M": 3 << 19, "1G": 1 << 30, "2GiB": 2 << 30,
		"0.5K": 512, "1048576": 1 << 20,
	}
	for in, want := range good {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-3", "-1K", "1.3", "0.1K", "abc", "4X", "4MM", "1e3", "0x10",
		"1_000", "NaN", "Inf", "2000000G", "1.5.5"} {
		if n, err := ParseBytes(in); err == nil || !strings.Contains(err.Error(), "not a byte count") {
			t.Errorf("ParseBytes(%q) = %d, %v; want a \"not a byte count\" error", in, n, err)
		}
	}
}
