package transport

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

var (
	regMu      sync.RWMutex
	transports = map[string]Transport{}
)

// Register makes a transport available by name. It panics on a duplicate or empty name,
// like database/sql.Register: that is a programming error found at init time.
func Register(t Transport) {
	regMu.Lock()
	defer regMu.Unlock()
	name := t.Name()
	if name == "" || name == "auto" {
		panic(fmt.Sprintf("transport: Register with reserved name %q", name))
	}
	if _, dup := transports[name]; dup {
		panic("transport: Register called twice for " + name)
	}
	transports[name] = t
}

// Lookup returns the transport registered under name, or an error that lists the names
// that are registered.
func Lookup(name string) (Transport, error) {
	regMu.RLock()
	defer regMu.RUnlock()
	if t, ok := transports[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w: unknown transport %q (forgotten import?); valid: %s",
		ErrInvalid, name, strings.Join(namesLocked(), ", "))
}

// Names lists the registered transports, sorted.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	names := make([]string, 0, len(transports))
	for n := range transports {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
