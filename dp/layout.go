package dp

import (
	"fmt"
	"strings"

	"github.com/goccl/goccl/transport"
)

// Spec registers one parameter tensor, in the order the model creates them (the order
// of PyTorch's model.parameters()). Every rank must register the same list.
type Spec struct {
	Name string
	// Len is the number of elements.
	Len int
	// Layer groups tensors that are used together (a layer's weight and bias). ZeRO-3
	// gathers and frees a layer at a time; layers must be numbered 0, 1, ... in forward
	// order and their tensors registered consecutively.
	Layer int
	// Init holds the initial values (nil: zeros). Only rank 0's are used: New broadcasts
	// them so that every replica starts equal.
	Init []float32
}

// unit is a contiguous run of parameters that is communicated as one: a gradient bucket
// for DDP and ZeRO-1/2, a layer for ZeRO-3. Under sharding every rank owns the slice
// [rank*per, (rank+1)*per) of the unit, padded to W*per elements.
type unit struct {
	index  int
	params []int // parameter indices, in registration order
	layer  int   // ZeRO-3: the layer; -1 for size buckets
	n      int   // elements without padding
	off    int   // offset in the (padded) full flat buffers
	per    int   // elements each rank owns (n, unsharded, for DDP)
	soff   int   // offset of this unit's slice in the shard buffers
}

// padded is the unit's length in the full buffers.
func (u *unit) padded(world int) int { return u.per * world }

// layout places every parameter in the flat buffers.
type layout struct {
	specs  []Spec
	units  []*unit // in communication order: unit 0 holds the last-registered params
	unitOf []int   // param -> unit index
	offOf  []int   // param -> offset inside its unit
	layers [][]int // layer -> units (ZeRO-3: exactly one)
	n      int     // parameter elements
	full   int     // elements of the full (padded) flat buffers
	shard  int     // elements of one rank's shard (sum of per)
}

// validateSpecs checks names, sizes and layer numbering.
func validateSpecs(specs []Spec) error {
	if len(specs) == 0 {
		return fmt.Errorf("dp: %w: no parameters registered", transport.ErrInvalid)
	}
	seen := make(map[string]int, len(specs))
	last := -1
	for i, s := range specs {
		switch {
		case s.Name == "":
			return fmt.Errorf("dp: %w: parameter %d has no name", transport.ErrInvalid, i)
		case s.Len < 0:
			return fmt.Errorf("dp: %w: parameter %q has %d elements (want >= 0)", transport.ErrInvalid, s.Name, s.Len)
		case s.Init != nil && len(s.Init) != s.Len:
			return fmt.Errorf("dp: %w: parameter %q has Len %d but %d initial values", transport.ErrInvalid, s.Name, s.Len, len(s.Init))
		case s.Layer != last && s.Layer != last+1:
			return fmt.Errorf("dp: %w: parameter %q is in layer %d after layer %d (layers are numbered 0, 1, ... in registration order)", transport.ErrInvalid, s.Name, s.Layer, last)
		}
		if j, dup := seen[s.Name]; dup {
			return fmt.Errorf("dp: %w: parameters %d and %d are both named %q", transport.ErrInvalid, j, i, s.Name)
		}
		seen[s.Name] = i
		last = s.Layer
	}
	if specs[0].Layer != 0 {
		return fmt.Errorf("dp: %w: the first parameter %q is in layer %d (layers start at 0)", transport.ErrInvalid, specs[0].Name, specs[0].Layer)
	}
	return nil
}

// buildLayout assigns parameters to units. Size buckets follow PyTorch's rule: walk the
// parameters in reverse registration order (roughly the order backward produces their
// gradients), add each to the open bucket, and close it once it holds at least its cap
// (firstCap for bucket 0, cap after). byLayer makes one unit per layer instead (ZeRO-3).
// sharded pads each unit to a multiple of world.
func buildLayout(specs []Spec, elemSize, firstCap, cap int, byLayer, sharded bool, world int) *layout {
	l := &layout{specs: specs, unitOf: make([]int, len(specs)), offOf: make([]int, len(specs))}
	var groups [][]int // reverse order of params
	var cur []int
	curBytes, limit := 0, firstCap
	for i := len(specs) - 1; i >= 0; i-- {
		if byLayer && len(cur) > 0 && specs[cur[0]].Layer != specs[i].Layer {
			groups, cur = append(groups, cur), nil
		}
		cur = append(cur, i)
		curBytes += specs[i].Len * elemSize
		if !byLayer && curBytes >= limit {
			groups, cur, curBytes, limit = append(groups, cur), nil, 0, cap
		}
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	for _, s := range specs {
		l.n += s.Len
	}
	// Units in communication order; their memory is laid out in registration order
	// (the last unit first), so each parameter's offset grows with its index.
	l.units = make([]*unit, len(groups))
	for ui, g := range groups {
		u := &unit{index: ui, layer: -1}
		for k := len(g) - 1; k >= 0; k-- { // back to registration order
			u.params = append(u.params, g[k])
		}
		if byLayer {
			u.layer = specs[g[0]].Layer
		}
		for _, p := range u.params {
			l.unitOf[p], l.offOf[p] = ui, u.n
			u.n += specs[p].Len
		}
		u.per = u.n
		if sharded {
			u.per = (u.n + world - 1) / world
		}
		l.units[ui] = u
	}
	for ui := len(l.units) - 1; ui >= 0; ui-- {
		u := l.units[ui]
		u.off, u.soff = l.full, l.shard
		if sharded {
			l.full += u.padded(world)
		} else {
			l.full += u.n
		}
		l.shard += u.per
	}
	nl := specs[len(specs)-1].Layer + 1
	l.layers = make([][]int, nl)
	for _, u := range l.units {
		seen := map[int]bool{}
		for _, p := range u.params {
			if ly := specs[p].Layer; !seen[ly] {
				seen[ly] = true
				l.layers[ly] = append(l.layers[ly], u.index)
			}
		}
	}
	return l
}

// describe is a one-line summary of the units for errors and reports.
func (l *layout) describe(elemSize int) string {
	var b strings.Builder
	for i, u := range l.units {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d:[%s..%s] %d B", i, l.specs[u.params[0]].Name, l.specs[u.params[len(u.params)-1]].Name, u.n*elemSize)
	}
	return b.String()
}
