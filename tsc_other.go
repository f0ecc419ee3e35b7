//go:build !amd64

package goccl

func rdtsc() int64 { return 0 }

func tscUsable() bool { return false }
