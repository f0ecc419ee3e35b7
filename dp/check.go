package dp

import (
	"context"
	"fmt"
	"hash/fnv"
	"unsafe"

	"github.com/goccl/goccl/transport"
)

// The registration check: every rank all-gathers a fixed-size summary of what it
// registered and how it is configured. If they differ, a second all-gather of the
// per-tensor (name hash, length, layer) triples over the common prefix finds the first
// tensor that differs, so the error names it instead of hanging or mixing gradients.

const summaryLen = 8

func (e *Engine) summary(params []Spec) []uint64 {
	h := fnv.New64a()
	for _, s := range params {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", s.Name, s.Len, s.Layer)
	}
	return []uint64{uint64(len(params)), uint64(e.lay.n), h.Sum64(), uint64(e.o.Stage),
		uint64(e.pt), uint64(e.wire), uint64(e.o.AccumSteps), uint64(e.o.FirstBucketBytes)<<32 | uint64(uint32(e.o.BucketBytes))}
}

func (e *Engine) checkRanks(ctx context.Context, params []Spec) error {
	if e.world == 1 {
		return nil
	}
	mine := e.summary(params)
	all := make([]uint64, summaryLen*e.world)
	if err := e.allGatherU64(ctx, mine, all); err != nil {
		return fmt.Errorf("dp: rank %d: exchange parameter registrations: %w", e.rank, err)
	}
	minCount, diff := len(params), -1
	for r := range e.world {
		s := all[r*summaryLen : (r+1)*summaryLen]
		minCount = min(minCount, int(s[0]))
		for k := range s {
			if s[k] != all[k] && diff < 0 {
				diff = r
			}
		}
	}
	if diff < 0 {
		return nil
	}
	ref, other := all[:summaryLen], all[diff*summaryLen:(diff+1)*summaryLen]
	names := [...]string{"parameter count", "element count", "", "ZeRO stage", "precision", "wire type", "accumulation steps", "bucket caps"}
	for k := 3; k < summaryLen; k++ {
		if ref[k] != other[k] {
			return fmt.Errorf("dp: rank %d: %w: ranks disagree on the %s: rank 0 has %s, rank %d has %s (every rank must pass the same Options)",
				e.rank, transport.ErrMismatch, names[k], optString(k, ref[k]), diff, optString(k, other[k]))
		}
	}
	// Find the first tensor that differs.
	mineT := make([]uint64, 3*minCount)
	for i := range minCount {
		h := fnv.New64a()
		h.Write([]byte(params[i].Name))
		mineT[3*i], mineT[3*i+1], mineT[3*i+2] = h.Sum64(), uint64(params[i].Len), uint64(params[i].Layer)
	}
	allT := make([]uint64, len(mineT)*e.world)
	if err := e.allGatherU64(ctx, mineT, allT); err != nil {
		return fmt.Errorf("dp: rank %d: exchange parameter registrations: %w", e.rank, err)
	}
	for i := range minCount {
		for r := 1; r < e.world; r++ {
			a, b := allT[3*i:3*i+3], allT[r*len(mineT)+3*i:r*len(mineT)+3*i+3]
			if a[0] != b[0] || a[1] != b[1] || a[2] != b[2] {
				return fmt.Errorf("dp: rank %d: %w: parameters registered differently: tensor %d is %d elements in layer %d on rank 0 but %d elements in layer %d on rank %d%s (this rank has %q)",
					e.rank, transport.ErrMismatch, i, a[1], a[2], b[1], b[2], r, nameNote(a[0] != b[0]), params[i].Name)
			}
		}
	}
	return fmt.Errorf("dp: rank %d: %w: parameters registered differently: rank 0 registered %d tensors (%d elements), rank %d registered %d tensors (%d elements)",
		e.rank, transport.ErrMismatch, ref[0], ref[1], diff, other[0], other[1])
}

func nameNote(differs bool) string {
	if differs {
		return ", under a different name"
	}
	return ""
}

func optString(k int, v uint64) string {
	switch k {
	case 4, 5:
		return transport.DType(v).String()
	case 7:
		return fmt.Sprintf("first %d B, then %d B", v>>32, uint32(v))
	}
	return fmt.Sprint(v)
}

func (e *Engine) allGatherU64(ctx context.Context, mine, all []uint64) error {
	b := func(xs []uint64) transport.Buffer {
		return transport.HostBuffer(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), 8*len(xs)))
	}
	return e.coll.AllGather(ctx, b(mine), b(all), len(mine), transport.Uint64).Wait(ctx)
}
