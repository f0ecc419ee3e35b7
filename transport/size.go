package transport

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxBytes bounds ParseBytes: far above any buffer, far below overflow.
const maxBytes = 1 << 50

// ParseBytes reads a byte count the way every goccl setting spells one: a number,
// optionally with a binary K, M or G (any case, with or without "i" and "B": 64K, 64KiB,
// 64kb) or a bare B. Fractions are allowed when they come to whole bytes (1.5M). The
// error says what would be valid; callers add which setting it was (and ErrInvalid).
func ParseBytes(s string) (int, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			t = strings.TrimSpace(t[:n-1])
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	v := f * mult
	if err != nil || !decimal(t) || v > maxBytes || v != math.Trunc(v) {
		return 0, fmt.Errorf("%q is not a byte count (want a whole number of bytes such as 4096, 512K, 1.5M or 4MiB, at most 2^50)", s)
	}
	return int(v), nil
}

// decimal reports whether t is digits with at most one decimal point (what ParseFloat
// accepts beyond that, signs, exponents, hex, underscores, NaN and Inf, is not a size).
func decimal(t string) bool {
	digits, dots := 0, 0
	for _, r := range t {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}
