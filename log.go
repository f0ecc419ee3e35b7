package goccl

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// Version is goccl's release, printed at Init and by goccl perf.
const Version = "0.1.0"

// Log levels beyond slog's: TRACE is below DEBUG.
const LevelTrace = slog.Level(-8)

// newLogger builds the rank's logger from GOCCL_DEBUG (WARN, INFO, TRACE), the
// subsystem filter GOCCL_DEBUG_SUBSYS ("INIT,COLL" or "^TRANSPORT") and GOCCL_DEBUG_FILE
// (%h = host, %p = pid). Every line carries host, pid and rank.
func newLogger(cfg Config, rank int) *slog.Logger {
	level := slog.LevelWarn
	switch strings.ToUpper(cfg.Debug) {
	case "INFO":
		level = slog.LevelInfo
	case "DEBUG":
		level = slog.LevelDebug
	case "TRACE":
		level = LevelTrace
	case "ERROR":
		level = slog.LevelError
	}
	var w io.Writer = os.Stderr
	if cfg.DebugFile != "" {
		name := strings.ReplaceAll(cfg.DebugFile, "%h", cfg.Host)
		name = strings.ReplaceAll(name, "%p", itoa(os.Getpid()))
		if f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			w = f
		}
	}
	h := slog.Handler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	if cfg.DebugSubsys != "" {
		h = newSubsysFilter(h, cfg.DebugSubsys)
	}
	return slog.New(h).With("host", cfg.Host, "pid", os.Getpid(), "rank", rank)
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
