// Package trace writes and merges Chrome/Perfetto trace files (the JSON trace event
// format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
// Each rank writes one file; Merge combines them into one file with one track (process)
// per rank, so a straggler is visible at a glance.
package trace

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Event is one trace event. Complete events ("X") carry a start and a duration in
// microseconds; metadata events ("M") name processes and threads.
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// File is the top-level object of a trace file.
type File struct {
	TraceEvents     []Event `json:"traceEvents"`
	DisplayTimeUnit string  `json:"displayTimeUnit,omitempty"`
}

// MaxEvents bounds one rank's buffered events; later events are dropped (and counted).
const MaxEvents = 1 << 20

// Recorder collects one rank's events in memory and writes them at Flush.
type Recorder struct {
	mu      sync.Mutex
	path    string
	pid     int
	events  []Event
	dropped int
}

// NewRecorder returns a recorder for rank that will write dir/goccl-trace.<name>.<rank>.json.
// label names the rank's track ("rank 3 on host-a").
func NewRecorder(dir, name string, rank int, label string) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	r := &Recorder{path: filepath.Join(dir, fmt.Sprintf("goccl-trace.%s.%d.json", name, rank)), pid: rank}
	r.events = append(r.events,
		Event{Name: "process_name", Ph: "M", Pid: rank, Args: map[string]any{"name": label}},
		Event{Name: "process_sort_index", Ph: "M", Pid: rank, Args: map[string]any{"sort_index": rank}})
	return r, nil
}

// Path is the file Flush writes.
func (r *Recorder) Path() string { return r.path }

// Thread names a track inside this rank's process.
func (r *Recorder) Thread(tid int, name string) {
	r.add(Event{Name: "thread_name", Ph: "M", Pid: r.pid, Tid: tid, Args: map[string]any{"name": name}})
}

// Span records a complete event on track tid.
func (r *Recorder) Span(tid int, cat, name string, start time.Time, dur time.Duration, args map[string]any) {
	r.add(Event{Name: name, Cat: cat, Ph: "X", Ts: us(start), Dur: float64(dur) / 1e3, Pid: r.pid, Tid: tid, Args: args})
}

func (r *Recorder) add(e Event) {
	r.mu.Lock()
	if len(r.events) < MaxEvents {
		r.events = append(r.events, e)
	} else {
		r.dropped++
	}
	r.mu.Unlock()
}

// Flush writes every event so far to the rank's file (replacing it).
func (r *Recorder) Flush() error {
	r.mu.Lock()
	f := File{TraceEvents: append([]Event(nil), r.events...), DisplayTimeUnit: "ms"}
	if r.dropped > 0 {
		f.TraceEvents = append(f.TraceEvents, Event{Name: "dropped_events", Ph: "M", Pid: r.pid,
			Args: map[string]any{"count": r.dropped}})
	}
	r.mu.Unlock()
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	tmp := r.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return os.Rename(tmp, r.path)
}

func us(t time.Time) float64 { return float64(t.UnixNano()) / 1e3 }

// Merge reads every goccl-trace.*.json file in dir and returns one File whose
// processes are the ranks, sorted by rank. Files of several communicators merge too;
// their ranks then share tracks.
func Merge(dir string) (*File, []string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "goccl-trace.*.json"))
	if err != nil {
		return nil, nil, fmt.Errorf("trace: %w", err)
	}
	if len(paths) == 0 {
		return nil, nil, fmt.Errorf("trace: no goccl-trace.*.json files in %s (set GOCCL_TRACE=%s when running)", dir, dir)
	}
	sort.Strings(paths)
	out := &File{DisplayTimeUnit: "ms"}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("trace: %w", err)
		}
		var f File
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, nil, fmt.Errorf("trace: %s is not a trace file: %w", p, err)
		}
		out.TraceEvents = append(out.TraceEvents, f.TraceEvents...)
	}
	sort.SliceStable(out.TraceEvents, func(i, j int) bool {
		a, b := out.TraceEvents[i], out.TraceEvents[j]
		if (a.Ph == "M") != (b.Ph == "M") {
			return a.Ph == "M"
		}
		if a.Pid != b.Pid {
			return a.Pid < b.Pid
		}
		return a.Ts < b.Ts
	})
	return out, paths, nil
}
