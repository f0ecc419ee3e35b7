package goccl

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/goccl/goccl/transport"
)

// Version is goccl's release, printed at Init and by goccl perf.
const Version = "0.1.0"

// Log levels beyond slog's: TRACE is below DEBUG.
const LevelTrace = slog.Level(-8)

// debugLevels are the values of Config.Debug (GOCCL_DEBUG), in any case; "" is WARN.
var debugLevels = map[string]slog.Level{"": slog.LevelWarn, "ERROR": slog.LevelError, "WARN": slog.LevelWarn,
	"INFO": slog.LevelInfo, "DEBUG": slog.LevelDebug, "TRACE": LevelTrace}

// debugSubsystems are the names Config.DebugSubsys (GOCCL_DEBUG_SUBSYS) lists.
var debugSubsystems = []string{"INIT", "COLL", "TRANSPORT", "ALL"}

// checkDebug refuses a log level or a subsystem goccl does not have: either would
// otherwise log at WARN, or filter out every line, without a word.
func checkDebug(level, subsys string) error {
	if _, ok := debugLevels[strings.ToUpper(strings.TrimSpace(level))]; !ok {
		return fmt.Errorf("goccl: %w: debug level %q (valid: ERROR, WARN, INFO, DEBUG, TRACE)", transport.ErrInvalid, level)
	}
	for _, s := range strings.Split(strings.TrimPrefix(strings.TrimSpace(subsys), "^"), ",") {
		if s = strings.ToUpper(strings.TrimSpace(s)); s != "" && !slices.Contains(debugSubsystems, s) {
			return fmt.Errorf("goccl: %w: debug subsystem %q in %q (valid: %s, each list optionally after ^ to exclude)",
				transport.ErrInvalid, s, subsys, strings.Join(debugSubsystems, ", "))
		}
	}
	return nil
}

// newLogger builds the rank's logger from GOCCL_DEBUG (WARN, INFO, TRACE), the
// subsystem filter GOCCL_DEBUG_SUBSYS ("INIT,COLL" or "^TRANSPORT") and GOCCL_DEBUG_FILE
// (%h = host, %p = pid). Every line carries host, pid and rank. A debug file that
// cannot be opened is an error, rather than logs that go elsewhere unannounced.
func newLogger(cfg Config, rank int) (*slog.Logger, error) {
	level := debugLevels[strings.ToUpper(strings.TrimSpace(cfg.Debug))]
	var w io.Writer = os.Stderr
	if cfg.DebugFile != "" {
		name := strings.ReplaceAll(cfg.DebugFile, "%h", cfg.Host)
		name = strings.ReplaceAll(name, "%p", itoa(os.Getpid()))
		f, err := debugFile(name)
		if err != nil {
			return nil, fmt.Errorf("goccl: rank %d: debug_file %q: %w", rank, cfg.DebugFile, err)
		}
		w = f
	}
	h := slog.Handler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	if cfg.DebugSubsys != "" {
		h = newSubsysFilter(h, cfg.DebugSubsys)
	}
	return slog.New(h).With("host", cfg.Host, "pid", os.Getpid(), "rank", rank), nil
}

// debugFiles holds each debug file this process has opened, by name, for the life of
// the process: communicators (goroutine ranks, repeated Inits) that name the same file
// share one descriptor instead of leaking one per Init. Each line is one write to an
// O_APPEND file, so lines from several communicators do not interleave.
var debugFiles struct {
	sync.Mutex
	m map[string]*os.File
}

func debugFile(name string) (*os.File, error) {
	debugFiles.Lock()
	defer debugFiles.Unlock()
	if f, ok := debugFiles.m[name]; ok {
		return f, nil
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if debugFiles.m == nil {
		debugFiles.m = map[string]*os.File{}
	}
	debugFiles.m[name] = f
	return f, nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// subsysFilter drops records whose "subsys" attribute is excluded.
type subsysFilter struct {
	slog.Handler
	allow   map[string]bool // nil: everything not in deny
	deny    map[string]bool
	bounded string // subsys bound by With, if any
}

func newSubsysFilter(h slog.Handler, spec string) *subsysFilter {
	f := &subsysFilter{Handler: h, deny: map[string]bool{}}
	exclude := strings.HasPrefix(spec, "^")
	spec = strings.TrimPrefix(spec, "^")
	if !exclude {
		f.allow = map[string]bool{}
	}
	for _, s := range strings.Split(spec, ",") {
		s = strings.ToUpper(strings.TrimSpace(s))
		if s == "" {
			continue
		}
		if exclude {
			f.deny[s] = true
		} else {
			f.allow[s] = true
		}
	}
	return f
}

func (f *subsysFilter) pass(sub string) bool {
	sub = strings.ToUpper(sub)
	if f.allow != nil && !f.allow["ALL"] {
		return f.allow[sub]
	}
	return !f.deny[sub]
}

func (f *subsysFilter) Handle(ctx context.Context, r slog.Record) error {
	sub := f.bounded
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "subsys" {
			sub = a.Value.String()
			return false
		}
		return true
	})
	if !f.pass(sub) {
		return nil
	}
	return f.Handler.Handle(ctx, r)
}

func (f *subsysFilter) WithAttrs(as []slog.Attr) slog.Handler {
	g := *f
	g.Handler = f.Handler.WithAttrs(as)
	for _, a := range as {
		if a.Key == "subsys" {
			g.bounded = a.Value.String()
		}
	}
	return &g
}

func (f *subsysFilter) WithGroup(name string) slog.Handler {
	g := *f
	g.Handler = f.Handler.WithGroup(name)
	return &g
}
