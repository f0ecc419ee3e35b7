package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/transport"
)

// --interleave: algorithms compared in the same seconds.
//
// Without it, `--algo auto,ring,...` prints one whole report after another, so two
// algorithms' rows for one size are timed seconds or minutes apart. On a shared VM the
// same launch runs 10-40 % faster or slower from one such moment to the next
// (BENCHMARKS.md, "Speed", 27 and 45d), which is more than the 10 % by which auto may
// trail the best fixed algorithm. With --interleave N every row is timed in N blocks of
// about -n/N calls per algorithm, the algorithms taking turns block by block, and each
// algorithm's row reports its median block. The order rotates from block to block and
// is reversed in every other round of rotations, so that no algorithm always runs first
// or after the same one. A stall of the VM then lands in one algorithm's block, which
// the median drops, and a slow phase slows every algorithm alike.
//
// The measuring pass runs timeTest's loops once with every algorithm (interleaver);
// then each algorithm's report runs the same loops again, printing its points in the
// order they were measured (replay), so the tables, the JSON and the plot are the ones
// the plain mode writes.

// interleaver is the measuring pass's state: for every algorithm, its points in the
// order timeTest asks for them.
type interleaver struct {
	algos []string
	got   [][]Half
}

// replay hands one algorithm's measured points back to its report.
type replay struct{ pts []Half }

// measure times one half of a row: the plain way, in turns with the other algorithms
// (the measuring pass), or not at all (the points that pass measured).
func (b *bench) measure(ctx context.Context, k Counts, dt transport.DType, op transport.Op, root int, inPlace bool) (Half, error) {
	switch {
	case b.replay != nil:
		if len(b.replay.pts) == 0 {
			return Half{}, errors.New("perf: --interleave: the report asked for more points than were measured")
		}
		h := b.replay.pts[0]
		b.replay.pts = b.replay.pts[1:]
		if h.Wrong > 0 && b.rank == 0 { // h.Wrong is summed over ranks already; count the point once
			b.errors++
		}
		return h, nil
	case b.inter != nil:
		return Half{}, b.interleaved(ctx, k, dt, op, root, inPlace)
	}
	return b.benchTime(ctx, k, dt, op, root, inPlace, b.o.Iters, b.o.Check)
}

// interleaved times one half of a row for every algorithm, in -interleave blocks.
func (b *bench) interleaved(ctx context.Context, k Counts, dt transport.DType, op transport.Op, root int, inPlace bool) error {
	in, blocks := b.inter, b.o.Interleave
	na := len(in.algos)
	per := make([][]Half, na)
	order := make([]int, na)
	for blk := range blocks {
		iters := b.o.Iters / blocks
		if blk < b.o.Iters%blocks {
			iters++
		}
		for j := range order {
			order[j] = (j + blk) % na
		}
		if (blk/na)%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			if err := setAlgo(b.comm, in.algos[i]); err != nil {
				return err
			}
			checks := 0
			if blk == blocks-1 { // -c checks a row once, as without --interleave
				checks = b.o.Check
			}
			h, err := b.benchTime(ctx, k, dt, op, root, inPlace, iters, checks)
			if err != nil {
				if in.algos[i] != "" {
					err = fmt.Errorf("--algo %s: %w", in.algos[i], err)
				}
				return err
			}
			per[i] = append(per[i], h)
		}
	}
	for i, hs := range per {
		in.got[i] = append(in.got[i], medianBlock(hs))
	}
	return nil
}

// medianBlock is the block of median time (the lower of the two middle ones for an
// even count), with the wrong elements of every block that was checked.
func medianBlock(hs []Half) Half {
	s := slices.Clone(hs)
	slices.SortStableFunc(s, func(a, b Half) int {
		switch {
		case a.TimeUs < b.TimeUs:
			return -1
		case a.TimeUs > b.TimeUs:
			return 1
		}
		return 0
	})
	m := s[(len(s)-1)/2]
	m.Wrong, m.Checked = 0, false
	for _, h := range hs {
		m.Wrong += h.Wrong
		m.Checked = m.Checked || h.Checked
	}
	return m
}

// measureInterleaved is --interleave's measuring pass over every algorithm: the points
// of each, in timeTest's order, for its report to replay.
func measureInterleaved(ctx context.Context, comm *goccl.Comm, o *Options, algos []string, hb *hostBuffers, stderr io.Writer) ([][]Half, int) {
	b, err := newBench(ctx, comm, o, hb)
	if err != nil {
		fmt.Fprintf(stderr, "perf: rank %d: %v\n", comm.Rank(), err)
		return nil, exitFor(err)
	}
	defer b.free()
	b.inter = &interleaver{algos: algos, got: make([][]Half, len(algos))}
	if err := b.runAll(ctx); err != nil {
		fmt.Fprintf(stderr, "perf: rank %d: --interleave %d: %v\n", comm.Rank(), o.Interleave, err)
		return nil, runExit(err)
	}
	return b.inter.got, ExitOK
}
