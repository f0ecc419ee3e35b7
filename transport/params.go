package transport

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ParamChecker is implemented by a Transport whose Params can be checked before it
// opens. goccl.Init checks the Params of every registered transport, whichever ends
// up carrying the links, so a misspelt key or a malformed value is an error at Init
// rather than a silent default, or an error only on the host where that transport
// is picked.
type ParamChecker interface {
	// ParamPrefixes are the key prefixes the transport reads, each with its dot
	// ("tcp."). A transport that is not a ParamChecker owns "<name>.".
	ParamPrefixes() []string
	// CheckParams returns an error wrapping ErrInvalid that names the key, its value
	// and what would be valid, for a key under its prefixes that it does not know or
	// a value it would refuse. Keys under other prefixes are not its business.
	CheckParams(Params) error
}

// CheckParams checks p against the registered transports: each ParamChecker checks
// the keys under its prefixes, and a dotted key under a prefix that no transport reads
// ("tpc.sockets") is an error listing the prefixes that are read. Keys without a dot
// (local_rank, which the communicator sets) are left alone.
func CheckParams(p Params) error {
	regMu.RLock()
	ts := make([]Transport, 0, len(transports))
	for _, n := range namesLocked() {
		ts = append(ts, transports[n])
	}
	regMu.RUnlock()
	owned := map[string]bool{}
	for _, t := range ts {
		pc, ok := t.(ParamChecker)
		if !ok {
			owned[t.Name()+"."] = true
			continue
		}
		for _, pre := range pc.ParamPrefixes() {
			owned[pre] = true
		}
		if err := pc.CheckParams(p); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dot := strings.IndexByte(k, '.')
		if dot < 0 || owned[k[:dot+1]] {
			continue
		}
		valid := make([]string, 0, len(owned))
		for pre := range owned {
			valid = append(valid, pre)
		}
		sort.Strings(valid)
		return fmt.Errorf("%w: parameter %q: no transport reads %q keys (valid prefixes: %s)",
			ErrInvalid, k, k[:dot+1], strings.Join(valid, ", "))
	}
	return nil
}

// UnknownParam returns the first key (in sorted order) under prefix that is not in
// known, or "" when there is none: the check every ParamChecker starts with.
func UnknownParam(p Params, prefix string, known []string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return k
		}
	}
	return ""
}
