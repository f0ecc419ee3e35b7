package algos

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/goccl/goccl/transport"
)

// Spec is a parsed algorithm choice: a default rule list plus optional per-collective
// lists, each an ordered set of "algorithm below a size" rules. Parse one with
// ParseSpec; the zero value (and a nil *Spec) means "auto" everywhere.
type Spec struct {
	def   []rule
	kinds map[transport.Kind][]rule
	order []transport.Kind // per-collective sections in the order written, for String
}

type rule struct {
	alg   string // a registered name or Auto
	below int    // bytes; 0 = no bound (applies to every remaining size)
}

// ParseSpec parses an algorithm choice, the value of Config.Algo and GOCCL_ALGO:
//
//	spec     = section { (";" | ",") section }
//	section  = [ collective ":" ] rules     (no collective: the default for all)
//	rules    = rule { "," rule }
//	rule     = algorithm [ "<" size ]       (algorithm: auto, naive, ring, tree, ...)
//	size     = digits [ "B" | "K" | "KiB" | "KB" | "M" | "MiB" | "MB" | "G" | "GiB" | "GB" ]
//
// A token with a colon starts a collective's section; tokens without one continue the
// current section. Inside a section the first rule whose bound exceeds the call's size
// wins ("tree<64K,ring": tree below 64 KiB, ring from 64 KiB up); a size matched by no
// rule of a collective's section goes to the default section, and one matched by no
// rule at all goes to auto. Sizes are powers of 1024 (K = KiB) and count bytes as
// Bytes does (nccl-tests' size column). Collective names are those of
// transport.ParseKind (allreduce, all_reduce, ...). Examples:
//
//	auto
//	ring
//	allreduce:ring,broadcast:tree
//	tree<64K,ring;allgather:naive<4K,ring
//	allreduce:tree<64K,ring<64M,auto
//
// Errors wrap transport.ErrInvalid and name the bad token and the valid choices.
func ParseSpec(s string) (*Spec, error) {
	sp := &Spec{kinds: map[transport.Kind][]rule{}}
	s = strings.TrimSpace(s)
	if s == "" {
		return sp, nil
	}
	cur, curKind := &sp.def, transport.KindNone
	seen := map[transport.Kind]bool{}
	for _, part := range strings.Split(s, ";") {
		for _, tok := range strings.Split(part, ",") {
			tok = strings.TrimSpace(tok)
			if tok == "" {
				return nil, fmt.Errorf("algos: %w: algorithm spec %q has an empty entry", transport.ErrInvalid, s)
			}
			if name, rest, ok := strings.Cut(tok, ":"); ok {
				k, err := transport.ParseKind(strings.TrimSpace(name))
				if err != nil {
					return nil, fmt.Errorf("algos: in algorithm spec %q: %w", s, err)
				}
				if seen[k] {
					return nil, fmt.Errorf("algos: %w: algorithm spec %q gives %s twice", transport.ErrInvalid, s, k)
				}
				seen[k] = true
				sp.order = append(sp.order, k)
				list := sp.kinds[k]
				cur, curKind, tok = &list, k, strings.TrimSpace(rest)
			}
			r, err := parseRule(tok)
			if err != nil {
				return nil, fmt.Errorf("algos: in algorithm spec %q: %w", s, err)
			}
			if n := len(*cur); n > 0 {
				prev := (*cur)[n-1]
				if prev.below == 0 {
					return nil, fmt.Errorf("algos: %w: in algorithm spec %q, %q follows %q, which already covers every size",
						transport.ErrInvalid, s, tok, prev)
				}
				if r.below != 0 && r.below <= prev.below {
					return nil, fmt.Errorf("algos: %w: in algorithm spec %q, %q must have a larger bound than %q",
						transport.ErrInvalid, s, tok, prev)
				}
			}
			*cur = append(*cur, r)
			if curKind != transport.KindNone {
				sp.kinds[curKind] = *cur
			}
		}
		// A ';' ends a collective's section: what follows is the default again
		// unless it names a collective.
		cur, curKind = &sp.def, transport.KindNone
	}
	return sp, nil
}

func parseRule(tok string) (rule, error) {
	name, size, bounded := strings.Cut(tok, "<")
	name = strings.ToLower(strings.TrimSpace(name))
	if name != Auto {
		if _, err := Lookup(name); err != nil {
			return rule{}, fmt.Errorf("%w: unknown algorithm %q; valid: %s", transport.ErrInvalid, name, validNames())
		}
	}
	r := rule{alg: name}
	if bounded {
		n, err := ParseSize(size)
		if err != nil {
			return rule{}, err
		}
		if n == 0 {
			return rule{}, fmt.Errorf("%w: %q: a size bound must be above 0", transport.ErrInvalid, tok)
		}
		r.below = n
	}
	return r, nil
}

// ParseSize parses a byte count with an optional binary suffix: 512, 8B, 64K, 64KiB,
// 64KB, 4M, 1G (K, M and G are powers of 1024, as in nccl-tests); transport.ParseBytes.
func ParseSize(s string) (int, error) {
	n, err := transport.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%w: bad size: %v", transport.ErrInvalid, err)
	}
	return n, nil
}

func (r rule) String() string {
	if r.below == 0 {
		return r.alg
	}
	return r.alg + "<" + FormatSize(r.below)
}

// FormatSize writes n bytes the way ParseSize reads it, in the largest exact unit.
func FormatSize(n int) string {
	for _, u := range []struct {
		s string
		m int
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.Itoa(n/u.m) + u.s
		}
	}
	return strconv.Itoa(n)
}

// String is the canonical form of the spec; ParseSpec(s.String()) gives the same Spec.
func (s *Spec) String() string {
	if s == nil || (len(s.def) == 0 && len(s.order) == 0) {
		return Auto
	}
	var parts []string
	join := func(rs []rule) string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.String()
		}
		return strings.Join(out, ",")
	}
	if len(s.def) > 0 {
		parts = append(parts, join(s.def))
	}
	for _, k := range s.order {
		parts = append(parts, k.String()+":"+join(s.kinds[k]))
	}
	return strings.Join(parts, ";")
}

// Resolve parses spec and resolves it for one call; see Spec.Resolve. Callers that
// resolve often should parse once.
func Resolve(spec string, kind transport.Kind, bytes, world int, model CostModel) (Algorithm, string, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return nil, "", err
	}
	return s.Resolve(kind, bytes, world, model)
}

// Resolve picks the algorithm for one call of kind moving bytes (as Bytes counts them)
// over world ranks, and says why in a short human-readable reason:
//
//	"ring (config)", "tree (config: allreduce < 64K)",
//	"tree (auto: model 12us vs ring 40us)", "naive (fallback: tree does not implement gather)"
//
// Order: the spec's matching rule, else auto. Auto asks model.Predict for every
// registered built-in algorithm that implements kind and takes the fastest (ties go to
// ring, then tree, naive and rd); when model spans hosts (HostModel with several ranks on
// a host) the hierarchical algorithm "hier" competes too, if it is registered. A configured algorithm that does not implement kind
// falls back along tree -> ring -> naive (any other algorithm -> ring -> naive), skipping
// unregistered ones; naive implements every collective.
func (s *Spec) Resolve(kind transport.Kind, bytes, world int, model CostModel) (Algorithm, string, error) {
	if !userKind(kind) {
		return nil, "", fmt.Errorf("algos: %w: cannot choose an algorithm for %s", transport.ErrInvalid, kind)
	}
	name, why := Auto, ""
	if s != nil {
		name, why = s.match(kind, bytes)
	}
	if name == Auto {
		return autoChoose(kind, bytes, world, model)
	}
	a, err := Lookup(name)
	if err != nil {
		return nil, "", err
	}
	if a.Supports(kind) {
		return a, name + " (" + why + ")", nil
	}
	for next := fallbackOf(name); next != ""; next = fallbackOf(next) {
		if fb, err := Lookup(next); err == nil && fb.Supports(kind) {
			return fb, fmt.Sprintf("%s (fallback: %s does not implement %s)", next, name, kind), nil
		}
	}
	return nil, "", fmt.Errorf("algos: %w: %s does not implement %s and no algorithm in its fallback chain does "+
		"(import github.com/goccl/goccl/algos/naive)", transport.ErrNotSupported, name, kind)
}

// fallbackOf is the next link of the documented fallback chain.
func fallbackOf(name string) string {
	switch name {
	case "naive":
		return ""
	case "ring":
		return "naive"
	}
	return "ring"
}

// Auto reports whether the spec leaves a call of kind and bytes to auto.
func (s *Spec) Auto(kind transport.Kind, bytes int) bool {
	if s == nil {
		return true
	}
	name, _ := s.match(kind, bytes)
	return name == Auto
}

// match finds the rule for a call: the collective's section, then the default section.
func (s *Spec) match(kind transport.Kind, bytes int) (string, string) {
	for _, r := range s.kinds[kind] {
		if r.below == 0 || bytes < r.below {
			if r.below == 0 {
				return r.alg, "config: " + kind.String()
			}
			return r.alg, fmt.Sprintf("config: %s < %s", kind, FormatSize(r.below))
		}
	}
	for _, r := range s.def {
		if r.below == 0 || bytes < r.below {
			if r.below == 0 {
				return r.alg, "config"
			}
			return r.alg, "config: < " + FormatSize(r.below)
		}
	}
	return Auto, ""
}

// preference orders the built-in algorithms for auto's ties; rd (algos/rd) competes
// where it is registered, last, so that it must be strictly faster. (Its one real tie:
// at two ranks its direct exchange and the ring's exchange send the same messages; the
// ring measured as fast or faster over shm, rd up to 2x faster over tcp.)
var preference = []string{"ring", "tree", "naive", "rd"}

// hierName is the hierarchical algorithm (algos/hier), a candidate for auto only when
// the model's ranks span hosts with more than one rank on a host (CostModel.Inter and
// PerHost, see HostModel), last in preference so that it must be strictly faster.
const hierName = "hier"

// spansHosts reports whether world ranks under m sit on several hosts, several to one.
func (m CostModel) spansHosts(world int) bool {
	l, h := m.split(world)
	return h > 1 && l > 1
}

func autoChoose(kind transport.Kind, bytes, world int, model CostModel) (Algorithm, string, error) {
	type cand struct {
		a Algorithm
		t time.Duration
	}
	var cands []cand
	names := preference
	if model.spansHosts(world) {
		names = append(names[:len(names):len(names)], hierName)
	}
	for _, name := range names {
		a, err := Lookup(name)
		if err != nil || !a.Supports(kind) {
			continue
		}
		t, err := model.Predict(name, kind, bytes, world)
		if err != nil {
			return nil, "", err
		}
		cands = append(cands, cand{a, t})
	}
	if len(cands) == 0 {
		return nil, "", fmt.Errorf("algos: %w: no registered algorithm implements %s (registered: %s; "+
			"import github.com/goccl/goccl/algos/naive)", transport.ErrNotSupported, kind, strings.Join(Names(), ", "))
	}
	best, second := 0, -1
	for i := 1; i < len(cands); i++ {
		if cands[i].t < cands[best].t {
			best, second = i, best
		} else if second < 0 || cands[i].t < cands[second].t {
			second = i
		}
	}
	b := cands[best]
	switch {
	case world == 1:
		return b.a, b.a.Name() + " (auto: world of 1 rank, a local copy)", nil
	case second < 0:
		return b.a, fmt.Sprintf("%s (auto: only %s implements %s)", b.a.Name(), b.a.Name(), kind), nil
	}
	c := cands[second]
	return b.a, fmt.Sprintf("%s (auto: model %s vs %s %s)", b.a.Name(), FormatDuration(b.t), c.a.Name(), FormatDuration(c.t)), nil
}

// FormatDuration prints a model time compactly in microseconds ("12us", "3.4us") or
// milliseconds ("1.25ms"), as the selector's reasons and goccl perf --predict show it.
func FormatDuration(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us < 10:
		return strconv.FormatFloat(us, 'f', 1, 64) + "us"
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 0, 64) + "us"
	case us < 1e6:
		return strconv.FormatFloat(us/1000, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(us/1e6, 'f', 2, 64) + "s"
}
