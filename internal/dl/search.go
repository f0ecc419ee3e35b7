package dl

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Spec describes one shared library and where to look for it.
type Spec struct {
	// Name is the human name used in errors ("NCCL", "CUDA runtime").
	Name string
	// Path is an explicit file or directory from config; when set, only it is tried,
	// so a user who names a library never silently gets a different one.
	Path string
	// PathFrom says where Path came from, for errors ("Params nccl.lib").
	PathFrom string
	// Sonames are the file names to try, best first ("libcudart.so.13", "libcudart.so.12").
	Sonames []string
	// WheelDirs are directories relative to a Python site-packages root where pip wheels
	// put the library ("nvidia/nccl/lib").
	WheelDirs []string
	// ExtraDirs are absolute directories tried after the wheels (toolkit installs).
	ExtraDirs []string
	// SiteDirs overrides the discovered site-packages roots (tests); nil = discover.
	SiteDirs []string
	// Global opens the library RTLD_GLOBAL, so libraries loaded later can bind to it.
	Global bool
}

// Candidate is one place to try.
type Candidate struct {
	Path string // a file path, or a bare soname for the system search
	From string // where it came from ("system library path", "pip wheel /x/site-packages")
}

// Candidates lists, in order, every place Open tries for s. Wheel and toolkit entries
// are listed only for files that exist, so the list stays short; Searched describes
// the rest for error messages.
func (s Spec) Candidates() []Candidate {
	if s.Path != "" {
		from := s.PathFrom
		if from == "" {
			from = "explicit path"
		}
		if fi, err := os.Stat(s.Path); err == nil && fi.IsDir() {
			var out []Candidate
			for _, so := range s.Sonames {
				out = append(out, Candidate{Path: filepath.Join(s.Path, so), From: from})
			}
			return out
		}
		return []Candidate{{Path: s.Path, From: from}}
	}
	var out []Candidate
	for _, so := range s.Sonames {
		out = append(out, Candidate{Path: so, From: "system library path"})
	}
	for _, root := range s.siteDirs() {
		for _, wd := range s.WheelDirs {
			for _, so := range s.Sonames {
				p := filepath.Join(root, wd, so)
				if fileExists(p) {
					out = append(out, Candidate{Path: p, From: "pip wheel in " + root})
				}
			}
		}
	}
	for _, d := range s.ExtraDirs {
		for _, so := range s.Sonames {
			p := filepath.Join(d, so)
			if fileExists(p) {
				out = append(out, Candidate{Path: p, From: "toolkit directory " + d})
			}
		}
	}
	return out
}

// Searched is a one-line description of everything Candidates looks at, including the
// places where nothing was found.
func (s Spec) Searched() string {
	if s.Path != "" {
		from := s.PathFrom
		if from == "" {
			from = "explicit path"
		}
		return from + " = " + s.Path
	}
	parts := []string{"system library path for " + strings.Join(s.Sonames, ", ")}
	roots := s.siteDirs()
	if len(s.WheelDirs) > 0 {
		if len(roots) == 0 {
			parts = append(parts, "pip wheels ("+strings.Join(s.WheelDirs, ", ")+"): no Python site-packages directory found")
		} else {
			parts = append(parts, "pip wheels "+strings.Join(s.WheelDirs, ", ")+" under "+strings.Join(roots, ", "))
		}
	}
	if len(s.ExtraDirs) > 0 {
		parts = append(parts, strings.Join(s.ExtraDirs, ", "))
	}
	return strings.Join(parts, "; ")
}

func (s Spec) siteDirs() []string {
	if s.SiteDirs != nil {
		return s.SiteDirs
	}
	return SiteDirs()
}

// SiteDirs returns the Python site-packages (and dist-packages) roots on this machine,
// found without running Python: $VIRTUAL_ENV and $CONDA_PREFIX first (the environment
// a user activated), then PYTHONPATH entries, the user site, the prefix of the python3
// on PATH, and the system locations.
func SiteDirs() []string {
	var pats []string
	add := func(prefix string) {
		if prefix == "" {
			return
		}
		pats = append(pats, filepath.Join(prefix, "lib", "python3*", "site-packages"))
	}
	add(os.Getenv("VIRTUAL_ENV"))
	add(os.Getenv("CONDA_PREFIX"))
	for _, p := range filepath.SplitList(os.Getenv("PYTHONPATH")) {
		if p != "" {
			pats = append(pats, p)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		pats = append(pats, filepath.Join(home, ".local", "lib", "python3*", "site-packages"))
	}
	// The python3 on PATH: a virtual environment's bin/python3 links to its base
	// interpreter, so both the link's prefix (the environment) and the target's count.
	if py, err := exec.LookPath("python3"); err == nil {
		add(filepath.Dir(filepath.Dir(py)))
		if real, err := filepath.EvalSymlinks(py); err == nil {
			add(filepath.Dir(filepath.Dir(real)))
		}
	}
	pats = append(pats,
		"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages",
		"/usr/lib64/python3*/site-packages", "/opt/conda/lib/python3*/site-packages",
	)
	seen := map[string]bool{}
	var out []string
	for _, pat := range pats {
		ms, _ := filepath.Glob(pat)
		sort.Sort(sort.Reverse(sort.StringSlice(ms))) // newest python3.N first
		for _, m := range ms {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() && !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

func sortStrings(s []string) { sort.Strings(s) }
