// Command cma compares process_vm_readv (cross-memory attach, how goccl's shm links
// and Open MPI's vader copy a large message once, straight out of the sender's memory)
// with Go's copy, on one thread, from this process's own memory, at the sizes where
// shm.single_copy_min could be set (BENCHMARKS.md, "Speed", 41b).
//
//	go build -o bench/bin/cma ./bench/cma && bench/bin/cma
//
// For each size it copies 256 MiB in all, the same source into the same destination
// (both touched first), and prints GB/s and us per copy for both ways.
package main

import (
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	const total = 256 << 20
	src, dst := make([]byte, 64<<20), make([]byte, 64<<20)
	for i := range src {
		src[i], dst[i] = 1, 2
	}
	pid := os.Getpid()
	for _, n := range []int{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20} {
		iters := total / n
		local := []unix.Iovec{{Base: &dst[0], Len: uint64(n)}}
		remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src[0])), Len: n}}
		start := time.Now()
		for range iters {
			if got, err := unix.ProcessVMReadv(pid, local, remote, 0); err != nil || got != n {
				fmt.Fprintf(os.Stderr, "cma: process_vm_readv of %d bytes: %d, %v\n", n, got, err)
				os.Exit(1)
			}
		}
		cma := time.Since(start)
		start = time.Now()
		for range iters {
			copy(dst[:n], src[:n])
		}
		mem := time.Since(start)
		rate := func(d time.Duration) float64 { return float64(n*iters) / d.Seconds() / 1e9 }
		per := func(d time.Duration) float64 { return d.Seconds() / float64(iters) * 1e6 }
		fmt.Printf("%9d B  process_vm_readv %6.2f GB/s (%8.1f us)  copy %6.2f GB/s (%8.1f us)\n",
			n, rate(cma), per(cma), rate(mem), per(mem))
	}
}
