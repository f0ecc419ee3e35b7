// Command membw measures this machine's two-thread copy bandwidth, the memory bound
// bench/allreduce.sh sets goccl's shm AllReduce against.
//
//	go build -o bench/bin/membw ./bench/membw && bench/bin/membw [-mib 64]
//
// Each of two goroutines (on their own threads) copies its own buffer, far larger than
// L3, into another with Go's copy (the memmove goccl's shm transport uses), over and over
// for at least half a second after a warm-up copy; both start together. It prints the
// bytes copied per second by both together in decimal GB/s, the best of five rounds, as
// "copy2_gbs <value>". Memory traffic is twice that: a read and a write per byte.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

func main() {
	mib := flag.Int("mib", 64, "buffer size per goroutine, MiB")
	flag.Parse()
	if *mib < 1 {
		fmt.Fprintf(os.Stderr, "membw: -mib %d: want at least 1\n", *mib)
		os.Exit(2)
	}
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2))
	n := *mib << 20
	type buf struct{ src, dst []byte }
	bufs := make([]buf, 2)
	for i := range bufs {
		bufs[i] = buf{make([]byte, n), make([]byte, n)}
		for j := range bufs[i].src {
			bufs[i].src[j] = byte(i + j)
		}
	}
	best := 0.0
	for range 5 {
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		rates := make([]float64, len(bufs))
		for i, b := range bufs {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				runtime.LockOSThread()
				copy(b.dst, b.src) // fault both in
				ready.Done()
				<-start
				t0 := time.Now()
				copies := 0
				for time.Since(t0) < 500*time.Millisecond {
					copy(b.dst, b.src)
					copies++
				}
				rates[i] = float64(copies) * float64(n) / time.Since(t0).Seconds()
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		best = max(best, rates[0]+rates[1])
	}
	fmt.Printf("copy2_gbs %.2f\n", best/1e9)
}
