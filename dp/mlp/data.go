package mlp

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// Dataset yields labelled samples by global index, so that every rank can read its own
// part of a global batch and a single process can read the whole of it.
type Dataset interface {
	Dim() int
	Classes() int
	// Sample writes sample i's features into x (len Dim) and returns its label.
	Sample(i int, x []float32) int
}

// Synthetic is a deterministic classification data set: each class has a random
// centre, and sample i is its class's centre plus unit Gaussian noise, all drawn from
// generators seeded by (seed, i). Any index can be produced on its own, in any order.
type Synthetic struct {
	dim, classes int
	seed         uint64
	centres      []float32
}

// NewSynthetic makes the data set. Centres are spread so that classes overlap a little
// and the loss falls steadily rather than at once.
func NewSynthetic(dim, classes int, seed uint64) (*Synthetic, error) {
	if dim < 1 || classes < 2 {
		return nil, fmt.Errorf("mlp: synthetic data with %d features and %d classes (want >= 1 and >= 2)", dim, classes)
	}
	s := &Synthetic{dim: dim, classes: classes, seed: seed, centres: make([]float32, dim*classes)}
	rng := rand.New(rand.NewPCG(seed, 0x63656e74))
	for i := range s.centres {
		s.centres[i] = float32(rng.NormFloat64() * 0.15)
	}
	return s, nil
}

func (s *Synthetic) Dim() int     { return s.dim }
func (s *Synthetic) Classes() int { return s.classes }

func (s *Synthetic) Sample(i int, x []float32) int {
	rng := rand.New(rand.NewPCG(s.seed, uint64(i)))
	label := int(rng.Uint64() % uint64(s.classes))
	c := s.centres[label*s.dim : (label+1)*s.dim]
	for j := range x[:s.dim] {
		x[j] = c[j] + float32(rng.NormFloat64())
	}
	return label
}

// Table is a data set read from a CSV file: numeric feature columns, then an integer
// class label (0, 1, ...) in the last column. Sample i is row i mod rows.
type Table struct {
	dim, classes int
	x            []float32
	y            []int
}

// MaxClasses bounds a CSV's labels: a label is an index into the output layer, which
// has one unit per class.
const MaxClasses = 1 << 24

// LoadCSV reads path. A first line that does not parse as numbers is taken as a header.
// Features must be finite float32 values, labels integers in [0, MaxClasses).
func LoadCSV(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mlp: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = true
	r.FieldsPerRecord = -1 // checked below, with a clearer message
	t := &Table{dim: -1}
	for line := 1; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("mlp: %s: %w", path, err)
		}
		if len(rec) < 2 {
			return nil, fmt.Errorf("mlp: %s line %d: %d columns (want features then a label)", path, line, len(rec))
		}
		if t.dim < 0 {
			if _, err := strconv.ParseFloat(strings.TrimSpace(rec[0]), 32); err != nil && line == 1 {
				continue // header
			}
			t.dim = len(rec) - 1
		}
		if len(rec)-1 != t.dim {
			return nil, fmt.Errorf("mlp: %s line %d: %d features (earlier rows have %d)", path, line, len(rec)-1, t.dim)
		}
		for j, s := range rec[:t.dim] {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 32)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("mlp: %s line %d column %d: %q is not a finite float32", path, line, j+1, s)
			}
			t.x = append(t.x, float32(v))
		}
		lab, err := strconv.Atoi(strings.TrimSpace(rec[t.dim]))
		if err != nil || lab < 0 || lab >= MaxClasses {
			return nil, fmt.Errorf("mlp: %s line %d: label %q (want an integer class 0, 1, ... below %d)", path, line, rec[t.dim], MaxClasses)
		}
		t.y = append(t.y, lab)
		t.classes = max(t.classes, lab+1)
	}
	if len(t.y) == 0 {
		return nil, fmt.Errorf("mlp: %s: no data rows", path)
	}
	t.classes = max(t.classes, 2)
	return t, nil
}

func (t *Table) Dim() int     { return t.dim }
func (t *Table) Classes() int { return t.classes }
func (t *Table) Rows() int    { return len(t.y) }

func (t *Table) Sample(i int, x []float32) int {
	r := i % len(t.y)
	copy(x, t.x[r*t.dim:(r+1)*t.dim])
	return t.y[r]
}
