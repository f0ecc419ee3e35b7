// Command cacheline measures the floor under any shared-memory small-message latency on
// this host: two processes hand a counter back and forth through one shared mapping,
// spinning on it, with nothing else in the way (no ring, no header, no library). It
// prints the mean round trip; one way is half of it.
//
//	go run ./bench/cacheline [-n 2000000]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	n := flag.Uint64("n", 2000000, "round trips")
	child := flag.String("child", "", "internal: the shared file to answer on")
	flag.Parse()
	if err := run(*n, *child); err != nil {
		fmt.Fprintln(os.Stderr, "cacheline:", err)
		os.Exit(1)
	}
}

func run(n uint64, child string) error {
	path := child
	if path == "" {
		f, err := os.CreateTemp("/dev/shm", "goccl-cacheline-")
		if err != nil {
			return err
		}
		path = f.Name()
		f.Close()
		defer os.Remove(path)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		return err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(m)
	ping := (*uint64)(unsafe.Pointer(&m[0]))   // written by the parent
	pong := (*uint64)(unsafe.Pointer(&m[128])) // written by the child, two cache lines away
	if child != "" {
		atomic.StoreUint64(pong, ^uint64(0)) // ready
		for i := uint64(1); i <= n; i++ {
			for atomic.LoadUint64(ping) != i {
			}
			atomic.StoreUint64(pong, i)
		}
		return nil
	}
	cmd := exec.Command(os.Args[0], "-n", fmt.Sprint(n), "-child", path)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadUint64(pong) != ^uint64(0) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return fmt.Errorf("the child did not start within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	for i := uint64(1); i <= n; i++ {
		atomic.StoreUint64(ping, i)
		for atomic.LoadUint64(pong) != i {
		}
	}
	rt := time.Since(start)
	if err := cmd.Wait(); err != nil {
		return err
	}
	fmt.Printf("cache-line round trip between two processes: %.0f ns (one way %.0f ns), %d round trips\n",
		float64(rt.Nanoseconds())/float64(n), float64(rt.Nanoseconds())/float64(2*n), n)
	return nil
}
