package goccl

import (
	"os"
	"strings"
	"sync"
)

// rdtsc reads the time-stamp counter (RDTSC, not serializing: about 11 ns here against
// 27 for the kernel clock through kvm-clock's vDSO, and off the path a fenced read
// would put the core on).
func rdtsc() int64

// tscUsable reports whether the time-stamp counter ticks at a constant rate in every
// power state (Linux's constant_tsc and nonstop_tsc flags), so that ticks convert to
// nanoseconds by one calibrated rate.
var tscUsable = sync.OnceValue(func() bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "flags") {
			f := " " + line + " "
			return strings.Contains(f, " constant_tsc ") && strings.Contains(f, " nonstop_tsc ")
		}
	}
	return false
})
