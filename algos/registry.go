package algos

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/goccl/goccl/transport"
)

var (
	regMu      sync.RWMutex
	algorithms = map[string]Algorithm{}
)

// Register makes an algorithm available by name; subpackages call it from init. It
// panics on an empty, reserved ("auto") or duplicate name, like database/sql.Register:
// that is a programming error found when the program starts.
func Register(a Algorithm) {
	regMu.Lock()
	defer regMu.Unlock()
	name := a.Name()
	if name == "" || name == Auto || strings.ContainsAny(name, ":,;<") {
		panic(fmt.Sprintf("algos: Register with reserved name %q", name))
	}
	if _, dup := algorithms[name]; dup {
		panic("algos: Register called twice for " + name)
	}
	algorithms[name] = a
}

// Lookup returns the algorithm registered under name. "auto" is not an algorithm (the
// selector picks one per call, see Resolve), so it is an error here too; the error lists
// the registered names.
func Lookup(name string) (Algorithm, error) {
	regMu.RLock()
	a, ok := algorithms[name]
	regMu.RUnlock()
	if ok {
		return a, nil
	}
	if name == Auto {
		return nil, fmt.Errorf("algos: %w: %q chooses an algorithm per call (use Resolve); registered: %s",
			transport.ErrInvalid, name, strings.Join(Names(), ", "))
	}
	return nil, fmt.Errorf("algos: %w: unknown algorithm %q (forgotten import?); valid: %s",
		transport.ErrInvalid, name, strings.Join(Names(), ", "))
}

// Names lists the registered algorithms, sorted.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]string, 0, len(algorithms))
	for n := range algorithms {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// validNames is the list shown in spec errors: auto first, then the registered names.
func validNames() string { return strings.Join(append([]string{Auto}, Names()...), ", ") }
