package tune

import (
	"fmt"
	"math"
	"sort"

	"github.com/goccl/goccl/algos"
)

// StagedAlgo is the name of algos/staged, which auto runs outside the cost model: it
// needs the communicator's staging area, so the model cannot price it, and whether it
// beats the model's algorithms depends on the host's caches and copy routines, and on
// the hour (on one 2-core VM it led from 128 KiB to 128 MiB on an AMD host; on an Intel
// one it lost from 8 MiB at 2 ranks one day and tied or led there the next:
// BENCHMARKS.md, "Speed", 17, 19 and 20). Calibrate times it beside the others
// and files the sizes where it won as a StagedRange.
const StagedAlgo = "staged"

// stagedMargin is how far apart staged and the algorithm that would run instead must be
// at a size for it to count as a win or a loss; closer is a tie, within one
// calibration's noise (on the 2-core VM one algorithm's point moves by more than that
// from launch to launch: BENCHMARKS.md, "Speed", 19 and 20).
const stagedMargin = 0.05

// StagedRange is where auto runs an AllReduce of ordinary buffers through the staging
// area on a communicator of World ranks whose links are all shm: from MinBytes up to
// MaxBytes (0: no upper bound), or never (Off).
type StagedRange struct {
	World    int  `json:"world"`
	Off      bool `json:"off,omitempty"`
	MinBytes int  `json:"min_bytes,omitempty"`
	MaxBytes int  `json:"max_bytes,omitempty"`
	// Samples are staged's own timings; the other algorithms' are in the file's Samples.
	Samples []Point `json:"samples,omitempty"`
}

// String is the range as shm.staged_min and shm.staged_max would set it.
func (r StagedRange) String() string {
	switch {
	case r.Off:
		return fmt.Sprintf("%d ranks: staged never (shm.staged_min=off)", r.World)
	case r.MaxBytes == 0:
		return fmt.Sprintf("%d ranks: staged from %d bytes (shm.staged_min=%d)", r.World, r.MinBytes, r.MinBytes)
	}
	return fmt.Sprintf("%d ranks: staged from %d to %d bytes (shm.staged_min=%d, shm.staged_max=%d)",
		r.World, r.MinBytes, r.MaxBytes, r.MinBytes, r.MaxBytes)
}

func (r StagedRange) check() error {
	switch {
	case r.World < 2:
		return fmt.Errorf("staged range: world=%d, want 2 ranks or more", r.World)
	case r.Off && (r.MinBytes != 0 || r.MaxBytes != 0):
		return fmt.Errorf("staged range for %d ranks: off with min_bytes=%d, max_bytes=%d, want neither", r.World, r.MinBytes, r.MaxBytes)
	case !r.Off && r.MinBytes < 1:
		return fmt.Errorf("staged range for %d ranks: min_bytes=%d, want 1 or more (or off)", r.World, r.MinBytes)
	case !r.Off && r.MaxBytes != 0 && r.MaxBytes < r.MinBytes:
		return fmt.Errorf("staged range for %d ranks: max_bytes=%d below min_bytes=%d, want 0 (no bound) or at least min_bytes",
			r.World, r.MaxBytes, r.MinBytes)
	}
	return nil
}

// FitStaged finds the sizes where staged won: staged holds staged's timings, others the
// timings of what would run instead (Calibrate passes the algorithm auto's model takes
// at each size; any sizes; a size either lacks is left out). At each size staged wins
// when it is stagedMargin faster than every one of others, loses when one of them is
// stagedMargin faster than staged, and ties otherwise. The range is the run of
// adjacent measured sizes without a loss that holds the most wins (then the longer, then
// the smaller run), with its ends halfway, on a log scale, to the sizes staged lost next
// to it, and open at the top when the run reaches the largest size. Ties inside a run or
// at its ends go with the run: a tie is within the calibration's noise, so the decided
// sizes around it say more (one tie at 32 MiB in a single calibration had cut off 128
// MiB, where staged was 1.2x faster: BENCHMARKS.md, "Speed", 20). Sizes up to
// algos.SmallExchangeMax, which auto never stages, do not count. No win: Off.
func FitStaged(world int, staged, others []Point) StagedRange {
	best := map[int]float64{}
	for _, p := range others {
		if t, ok := best[p.Bytes]; !ok || p.Seconds < t {
			best[p.Bytes] = p.Seconds
		}
	}
	var sizes []int
	score := map[int]int{} // 1 win, -1 loss, 0 tie
	for _, p := range staged {
		b, ok := best[p.Bytes]
		if !ok || p.Bytes <= algos.SmallExchangeMax {
			continue
		}
		if _, seen := score[p.Bytes]; !seen {
			sizes = append(sizes, p.Bytes)
		}
		switch {
		case p.Seconds < b*(1-stagedMargin):
			score[p.Bytes] = 1
		case p.Seconds > b*(1+stagedMargin):
			score[p.Bytes] = -1
		default:
			score[p.Bytes] = 0
		}
	}
	sort.Ints(sizes)
	r := StagedRange{World: world, Off: true, Samples: staged}
	lo, n, most := -1, 0, 0 // the chosen run, sizes[lo : lo+n], and its wins
	for i := 0; i < len(sizes); {
		if score[sizes[i]] < 0 {
			i++
			continue
		}
		j, won := i, 0
		for ; j < len(sizes) && score[sizes[j]] >= 0; j++ {
			won += score[sizes[j]]
		}
		if won > most || won == most && won > 0 && j-i > n {
			lo, n, most = i, j-i, won
		}
		i = j
	}
	if most == 0 {
		return r
	}
	mid := func(a, b int) int { return int(math.Sqrt(float64(a) * float64(b))) }
	r.Off = false
	r.MinBytes = sizes[lo]
	if lo > 0 {
		r.MinBytes = mid(sizes[lo-1], sizes[lo]) + 1
	}
	if hi := lo + n; hi < len(sizes) {
		r.MaxBytes = mid(sizes[hi-1], sizes[hi])
	}
	return r
}

// StagedFor is the file's staged range for a communicator of world ranks.
func (f File) StagedFor(world int) (StagedRange, bool) {
	for _, r := range f.Staged {
		if r.World == world {
			return r, true
		}
	}
	return StagedRange{}, false
}

// checkStaged validates the file's ranges: one per world size, each sound.
func checkStaged(rs []StagedRange) []error {
	var errs []error
	seen := map[int]bool{}
	for _, r := range rs {
		if err := r.check(); err != nil {
			errs = append(errs, err)
		}
		if seen[r.World] {
			errs = append(errs, fmt.Errorf("staged range: two for %d ranks, want one per world size", r.World))
		}
		seen[r.World] = true
	}
	return errs
}

// mergeStaged gathers the files' staged ranges for Refit: one per world size, the last
// file's where several have one.
func mergeStaged(files []File) []StagedRange {
	by := map[int]StagedRange{}
	for _, f := range files {
		for _, r := range f.Staged {
			by[r.World] = r
		}
	}
	out := make([]StagedRange, 0, len(by))
	for _, r := range by {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].World < out[j].World })
	return out
}
