// Command cacheline measures the floor under any shared-memory small-message latency on
// this host, between two processes through one shared mapping, with nothing else in the
// way (no library, no header checks, no bookkeeping):
//
//   - -mode pingpong (the default) hands a counter back and forth, spinning on it, and
//     prints the mean round trip; one way is half of it.
//   - -mode exchange is what a two-rank 8-byte AllReduce asks of its link: both processes
//     write a 64-byte record (its stamp stored last) into the other's ring and then poll
//     for the other's, a PAUSE or two between polls, as goccl's shm link does. It prints
//     the mean time per exchange, the link's floor for that call.
//
// The VM this project is measured on moves between phases in which these numbers differ
// 3-4x ("Speed", 24); running this beside an A/B says which phase the A/B saw.
//
//	go run ./bench/cacheline [-mode exchange] [-n 2000000]
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

// procyield runs cycles PAUSE instructions (the runtime's spin-wait hint).
//
//go:linkname procyield runtime.procyield
func procyield(cycles uint32)

const (
	record = 64      // bytes per record, as goccl's shm ring
	slots  = 1 << 16 // records per direction: 4 MiB, goccl's default ring
	stampW = 40      // the stamp's offset in a record, as goccl's
	pauses = 2       // PAUSEs between polls, as goccl's shm.pollPause
)

func main() {
	n := flag.Uint64("n", 2000000, "round trips (pingpong) or exchanges (exchange)")
	mode := flag.String("mode", "pingpong", "pingpong or exchange")
	child := flag.String("child", "", "internal: the shared file to answer on")
	flag.Parse()
	if err := run(*n, *mode, *child); err != nil {
		fmt.Fprintln(os.Stderr, "cacheline:", err)
		os.Exit(1)
	}
}

func run(n uint64, mode, child string) error {
	if mode != "pingpong" && mode != "exchange" {
		return fmt.Errorf("-mode %q: want pingpong or exchange", mode)
	}
	if n == 0 {
		return fmt.Errorf("-n 0: want at least one round trip or exchange")
	}
	size := 4096 + 2*slots*record
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
	if err := f.Truncate(int64(size)); err != nil {
		return err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(m)
	word := func(off int) *uint64 { return (*uint64)(unsafe.Pointer(&m[off])) }
	ping, pong := word(0), word(128) // parent's and child's words, two cache lines apart
	me := 0
	if child != "" {
		me = 1
	}
	if child != "" {
		atomic.StoreUint64(pong, ^uint64(0)) // ready
		if mode == "exchange" {
			exchange(m[4096:], me, n)
			return nil
		}
		for i := uint64(1); i <= n; i++ {
			for atomic.LoadUint64(ping) != i {
			}
			atomic.StoreUint64(pong, i)
		}
		return nil
	}
	cmd := exec.Command(os.Args[0], "-n", fmt.Sprint(n), "-mode", mode, "-child", path)
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
	if mode == "exchange" {
		exchange(m[4096:], me, n)
	} else {
		for i := uint64(1); i <= n; i++ {
			atomic.StoreUint64(ping, i)
			for atomic.LoadUint64(pong) != i {
			}
		}
	}
	took := time.Since(start)
	if err := cmd.Wait(); err != nil {
		return err
	}
	per := float64(took.Nanoseconds()) / float64(n)
	if mode == "exchange" {
		fmt.Printf("64-byte record exchange between two processes: %.0f ns per exchange, %d exchanges\n", per, n)
		return nil
	}
	fmt.Printf("cache-line round trip between two processes: %.0f ns (one way %.0f ns), %d round trips\n", per, per/2, n)
	return nil
}

// exchange writes n records into the other process's ring and reads n from its own, one
// of each per step. Direction d's ring is written by process 1-d and read by process d.
// The first steps (the other process may still be starting) count like the rest; at
// millions of steps they do not show.
func exchange(rings []byte, me int, n uint64) {
	out, in := rings[(1-me)*slots*record:], rings[me*slots*record:]
	var rec [record]byte
	for i := uint64(0); i < n; i++ {
		o := out[(i%slots)*record:]
		rec[0] = byte(i)
		copy(o[:stampW], rec[:stampW])
		copy(o[stampW+8:record], rec[stampW+8:])
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&o[stampW])), i+1)
		w := (*uint64)(unsafe.Pointer(&in[(i%slots)*record+stampW]))
		for atomic.LoadUint64(w) != i+1 {
			procyield(pauses)
		}
	}
}
