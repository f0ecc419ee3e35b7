package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// Models maps a transport name ("shm", "tcp") to its calibrated cost model.
type Models map[string]algos.CostModel

// FileVersion is the layout version Save writes: 3 added a model's crowded terms. Load
// also reads version 2 (no crowded terms: the model prices every world alike, as
// algos.CostModel does without Crowded) and version 1 (the three-parameter models,
// before call_ns, overhead_ns, async_ns and cores existed: their missing terms read as
// zero, i.e. the defaults algos.CostModel documents). A build before version 3 refuses
// a version-3 file by its number, not by an unknown field.
const FileVersion = 3

// File is what `goccl tune` writes: the models, and where and how they were measured.
type File struct {
	Version int                `json:"version"`
	Created time.Time          `json:"created"`
	Host    string             `json:"host,omitempty"`
	World   int                `json:"world"`            // ranks the models were measured with (0: several, see Worlds)
	Worlds  []int              `json:"worlds,omitempty"` // the world sizes of a joint fit (Refit)
	Models  map[string]Model   `json:"models"`
	Samples map[string][]Point `json:"samples,omitempty"` // the timings behind each model
	// Staged holds, per world size, where the staged AllReduce beat the models' algorithms
	// over shm (FitStaged); a communicator of a world size it lacks keeps the built-in
	// shm.staged_min.
	Staged []StagedRange `json:"staged,omitempty"`
}

// Model is one transport's CostModel in the file's units (nanoseconds, bytes/s).
type Model struct {
	Terms
	ChunkBytes int `json:"chunk_bytes,omitempty"`
	Cores      int `json:"cores,omitempty"`
	EagerBytes int `json:"eager_bytes,omitempty"`
	// Crowded holds the terms for more ranks than Cores on the host
	// (algos.CostModel.Crowded), when the samples had such worlds and worlds of at
	// most Cores ranks.
	Crowded *Terms `json:"crowded,omitempty"`
	// FitError is the worst relative error of the model over its samples.
	FitError float64 `json:"fit_error,omitempty"`
}

// Terms are a model's measured terms, what a fit finds.
type Terms struct {
	CallNs     float64 `json:"call_ns,omitempty"`
	AlphaNs    float64 `json:"alpha_ns"`
	OverheadNs float64 `json:"overhead_ns,omitempty"`
	AsyncNs    float64 `json:"async_ns,omitempty"`
	Beta       float64 `json:"beta_bytes_per_s"`
	Gamma      float64 `json:"gamma_bytes_per_s"` // 0: reduction is free
}

// NewFile wraps models measured over world ranks for Save.
func NewFile(m Models, world int) File {
	host, _ := os.Hostname()
	f := File{Version: FileVersion, Created: time.Now().UTC().Truncate(time.Second), Host: host, World: world,
		Models: map[string]Model{}}
	for name, cm := range m {
		f.Models[name] = fromCost(cm)
	}
	return f
}

func fromCost(cm algos.CostModel) Model {
	m := Model{Terms: termsOf(cm), ChunkBytes: cm.ChunkBytes, Cores: cm.Cores, EagerBytes: cm.EagerBytes}
	if cm.Crowded != nil {
		t := termsOf(*cm.Crowded)
		m.Crowded = &t
	}
	return m
}

func termsOf(cm algos.CostModel) Terms {
	ns := func(d time.Duration) float64 { return float64(d.Nanoseconds()) }
	return Terms{CallNs: ns(cm.Call), AlphaNs: ns(cm.Alpha), OverheadNs: ns(cm.Overhead), AsyncNs: ns(cm.Async),
		Beta: cm.Beta, Gamma: cm.Gamma}
}

// Cost is the model as the selector takes it.
func (m Model) Cost() algos.CostModel {
	cm := m.Terms.cost()
	cm.ChunkBytes, cm.Cores, cm.EagerBytes = m.ChunkBytes, m.Cores, m.EagerBytes
	if m.Crowded != nil {
		c := m.Crowded.cost()
		cm.Crowded = &c
	}
	return cm
}

func (t Terms) cost() algos.CostModel {
	return algos.CostModel{Call: time.Duration(t.CallNs), Alpha: time.Duration(t.AlphaNs), Overhead: time.Duration(t.OverheadNs),
		Async: time.Duration(t.AsyncNs), Beta: t.Beta, Gamma: t.Gamma}
}

// CostModels returns every model of the file as algos.CostModel.
func (f File) CostModels() Models {
	out := Models{}
	for name, m := range f.Models {
		c := m.Cost()
		c.Polls = builtin(name).Polls // how the transport waits, not a measurement
		out[name] = c
	}
	return out
}

// Save writes f to path as indented JSON (through a temporary file and a rename, so a
// reader never sees half a file).
func Save(path string, f File) error {
	if err := f.check(); err != nil {
		return fmt.Errorf("tune: save %s: %w", path, err)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("tune: save %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("tune: save %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("tune: save %s: %w", path, err)
	}
	return nil
}

// Load reads a file written by Save. A file of another version, or with a model whose
// numbers cannot be right (no bandwidth, negative latency), is an error naming the
// transport and the field.
func Load(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("tune: load: %w", err)
	}
	var f File
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("tune: load %s: %w: not a goccl tune file: %v", path, transport.ErrInvalid, err)
	}
	if err := f.check(); err != nil {
		return File{}, fmt.Errorf("tune: load %s: %w", path, err)
	}
	return f, nil
}

func (f File) check() error {
	if f.Version < 1 || f.Version > FileVersion {
		return fmt.Errorf("%w: file version %d, this build reads versions 1 to %d (rerun goccl tune)",
			transport.ErrInvalid, f.Version, FileVersion)
	}
	if len(f.Models) == 0 {
		return fmt.Errorf("%w: the file holds no models", transport.ErrInvalid)
	}
	names := make([]string, 0, len(f.Models))
	for n := range f.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	errs := checkStaged(f.Staged)
	for _, n := range names {
		m := f.Models[n]
		if m.Crowded != nil {
			if err := m.Crowded.check(); err != nil {
				errs = append(errs, fmt.Errorf("model %q, crowded: %w", n, err))
			}
		}
		if err := m.Terms.check(); err != nil {
			errs = append(errs, fmt.Errorf("model %q: %w", n, err))
		}
		switch {
		case n == "":
			errs = append(errs, errors.New("a model has no transport name"))
		case m.Cores < 0:
			errs = append(errs, fmt.Errorf("model %q: cores=%d, want 0 (a core per rank) or more", n, m.Cores))
		case m.EagerBytes < 0:
			errs = append(errs, fmt.Errorf("model %q: eager_bytes=%d, want 0 (16 KiB) or more", n, m.EagerBytes))
		case m.ChunkBytes < 0:
			errs = append(errs, fmt.Errorf("model %q: chunk_bytes=%d, want 0 (default) or more", n, m.ChunkBytes))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", transport.ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// check reports the first term out of its range.
func (t Terms) check() error {
	switch {
	case !(t.AlphaNs >= 0) || t.AlphaNs > 1e12:
		return fmt.Errorf("alpha_ns=%v, want 0 <= alpha_ns <= 1e12", t.AlphaNs)
	case !(t.CallNs >= 0) || t.CallNs > 1e12:
		return fmt.Errorf("call_ns=%v, want 0 <= call_ns <= 1e12", t.CallNs)
	case !(t.OverheadNs >= 0) || t.OverheadNs > 1e12:
		return fmt.Errorf("overhead_ns=%v, want 0 (= alpha/8) <= overhead_ns <= 1e12", t.OverheadNs)
	case !(t.AsyncNs >= 0) || t.AsyncNs > 1e12:
		return fmt.Errorf("async_ns=%v, want 0 <= async_ns <= 1e12", t.AsyncNs)
	case !(t.Beta > 0) || t.Beta > 1e15:
		return fmt.Errorf("beta_bytes_per_s=%v, want a positive bandwidth up to 1e15", t.Beta)
	case !(t.Gamma >= 0) || t.Gamma > 1e15:
		return fmt.Errorf("gamma_bytes_per_s=%v, want 0 (free) or a positive rate up to 1e15", t.Gamma)
	}
	return nil
}

// Refit fits one model per transport to the samples of several files (each measured at
// its own world size, on this host, e.g. `goccl tune --np 2`, `--np 3`, `--np 4`), so
// that one model serves every world size; see FitSets. Files without samples are an
// error, as is a transport whose samples do not fit.
func Refit(files []File) (File, error) {
	sets := map[string][]Set{}
	chunk, eager := map[string]int{}, map[string]int{}
	var worlds []int
	for i, f := range files {
		if len(f.Samples) == 0 {
			return File{}, fmt.Errorf("tune: %w: file %d (world %d) holds no samples to fit", transport.ErrInvalid, i+1, f.World)
		}
		worlds = append(worlds, f.World)
		for name, pts := range f.Samples {
			sets[name] = append(sets[name], Set{World: f.World, Points: pts})
			chunk[name], eager[name] = f.Models[name].ChunkBytes, f.Models[name].EagerBytes
		}
	}
	out := File{Version: FileVersion, Created: time.Now().UTC().Truncate(time.Second), Worlds: worlds, Models: map[string]Model{},
		Staged: mergeStaged(files)}
	out.Host, _ = os.Hostname()
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		m, worst, err := FitSets(sets[name], ShapeOf(name, chunk[name], runtime.NumCPU(), eager[name]))
		if err != nil {
			return File{}, fmt.Errorf("tune: transport %s: %w", name, err)
		}
		fm := fromCost(m)
		fm.FitError = worst
		out.Models[name] = fm
	}
	return out, nil
}
