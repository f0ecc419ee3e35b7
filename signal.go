package goccl

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Live communicators, for the SIGUSR1 dump ("who is stuck").
var (
	liveMu   sync.Mutex
	live     = map[*Comm]struct{}{}
	sigOnce  sync.Once
	dumpDest = os.Stderr
)

func registerLive(c *Comm) {
	liveMu.Lock()
	live[c] = struct{}{}
	liveMu.Unlock()
	if os.Getenv("GOCCL_DUMP_SIGNAL") == "0" {
		return
	}
	sigOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGUSR1)
		go func() {
			for range ch {
				DumpAll()
			}
		}()
	})
}

func unregisterLive(c *Comm) {
	liveMu.Lock()
	delete(live, c)
	liveMu.Unlock()
}

// DumpAll writes the flight record of every live communicator of this process to
// stderr. goccl does this on SIGUSR1 (set GOCCL_DUMP_SIGNAL=0 to leave SIGUSR1 alone);
// `goccl run` forwards SIGUSR1 to every rank.
func DumpAll() {
	liveMu.Lock()
	cs := make([]*Comm, 0, len(live))
	for c := range live {
		cs = append(cs, c)
	}
	liveMu.Unlock()
	for _, c := range cs {
		fmt.Fprint(dumpDest, c.DumpFlightRecord())
	}
}
