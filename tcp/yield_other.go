//go:build !linux

package tcp

// yield is a no-op where sched_yield is not available; runtime.Gosched still runs.
func yield() {}
