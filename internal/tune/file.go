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

// FileVersion is the layout version Save writes. Load also reads version 1 (the
// three-parameter models, before call_ns, overhead_ns, async_ns and cores existed:
// their missing terms read as zero, i.e. the defaults algos.CostModel documents).
const FileVersion = 2

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
	CallNs     float64 `json:"call_ns,omitempty"`
	AlphaNs    float64 `json:"alpha_ns"`
	OverheadNs float64 `json:"overhead_ns,omitempty"`
	AsyncNs    float64 `json:"async_ns,omitempty"`
	Beta       float64 `json:"beta_bytes_per_s"`
	Gamma      float64 `json:"gamma_bytes_per_s"` // 0: reduction is free
	ChunkBytes int     `json:"chunk_bytes,omitempty"`
	Cores      int     `json:"cores,omitempty"`
	EagerBytes int     `json:"eager_bytes,omitempty"`
	// FitError is the worst relative error of the model over its samples.
	FitError float64 `json:"fit_error,omitempty"`
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
	ns := func(d time.Duration) float64 { return float64(d.Nanoseconds()) }
	return Model{CallNs: ns(cm.Call), AlphaNs: ns(cm.Alpha), OverheadNs: ns(cm.Overhead), AsyncNs: ns(cm.Async),
		Beta: cm.Beta, Gamma: cm.Gamma, ChunkBytes: cm.ChunkBytes, Cores: cm.Cores, EagerBytes: cm.EagerBytes}
}

// Cost is the model as the selector takes it.
func (m Model) Cost() algos.CostModel {
	return algos.CostModel{Call: time.Duration(m.CallNs), Alpha: time.Duration(m.AlphaNs), Overhead: time.Duration(m.OverheadNs),
		Async: time.Duration(m.AsyncNs), Beta: m.Beta, Gamma: m.Gamma, ChunkBytes: m.ChunkBytes, Cores: m.Cores,
		EagerBytes: m.EagerBytes}
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
	if f.Version != FileVersion && f.Version != 1 {
		return fmt.Errorf("%w: file version %d, this build reads versions 1 and %d (rerun goccl tune)",
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
		switch {
		case n == "":
			errs = append(errs, errors.New("a model has no transport name"))
		case !(m.AlphaNs >= 0) || m.AlphaNs > 1e12:
			errs = append(errs, fmt.Errorf("model %q: alpha_ns=%v, want 0 <= alpha_ns <= 1e12", n, m.AlphaNs))
		case !(m.CallNs >= 0) || m.CallNs > 1e12:
			errs = append(errs, fmt.Errorf("model %q: call_ns=%v, want 0 <= call_ns <= 1e12", n, m.CallNs))
		case !(m.OverheadNs >= 0) || m.OverheadNs > 1e12:
			errs = append(errs, fmt.Errorf("model %q: overhead_ns=%v, want 0 (= alpha/8) <= overhead_ns <= 1e12", n, m.OverheadNs))
		case !(m.AsyncNs >= 0) || m.AsyncNs > 1e12:
			errs = append(errs, fmt.Errorf("model %q: async_ns=%v, want 0 <= async_ns <= 1e12", n, m.AsyncNs))
		case m.Cores < 0:
			errs = append(errs, fmt.Errorf("model %q: cores=%d, want 0 (a core per rank) or more", n, m.Cores))
		case m.EagerBytes < 0:
			errs = append(errs, fmt.Errorf("model %q: eager_bytes=%d, want 0 (16 KiB) or more", n, m.EagerBytes))
		case !(m.Beta > 0) || m.Beta > 1e15:
			errs = append(errs, fmt.Errorf("model %q: beta_bytes_per_s=%v, want a positive bandwidth up to 1e15", n, m.Beta))
		case !(m.Gamma >= 0) || m.Gamma > 1e15:
			errs = append(errs, fmt.Errorf("model %q: gamma_bytes_per_s=%v, want 0 (free) or a positive rate up to 1e15", n, m.Gamma))
		case m.ChunkBytes < 0:
			errs = append(errs, fmt.Errorf("model %q: chunk_bytes=%d, want 0 (default) or more", n, m.ChunkBytes))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", transport.ErrInvalid, errors.Join(errs...))
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
