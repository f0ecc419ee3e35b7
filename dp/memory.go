package dp

import (
	"fmt"
	"strings"
)

// Memory is what one rank holds, in bytes.
type Memory struct {
	Stage, World int
	// ElemBytes is the size of a working parameter (2 for bf16/fp16, 4 for fp32).
	ElemBytes int
	// N is the number of parameters; Padded is N plus the padding that makes every
	// unit divisible by the world size under ZeRO (equal to N for DDP).
	N, Padded int64
	// The persistent buffers: working parameters and gradients (full or shard, in the
	// working type), fp32 master weights (0 when the working type is fp32: the
	// parameters are the master weights) and the two fp32 Adam moments.
	Params, Grads, Master, Moments int64
	// WorkingPeak is the most transient memory held at once since New: ZeRO-2/3
	// gradient buckets (full size until reduce-scattered), ZeRO-3 gathered layers
	// (the current one plus the prefetched next), DDP compression buffers.
	WorkingPeak int64
}

// Total is the persistent bytes (Params + Grads + Master + Moments).
func (m Memory) Total() int64 { return m.Params + m.Grads + m.Master + m.Moments }

// Memory reports this rank's bytes.
func (e *Engine) Memory() Memory {
	return Memory{Stage: e.o.Stage, World: e.world, ElemBytes: e.pt.Size(), N: int64(e.lay.n), Padded: int64(e.lay.full),
		Params: int64(e.params.Len()), Grads: int64(e.grads.Len()), Master: int64(e.master.Len()),
		Moments: int64(e.m.Len() + e.v.Len()), WorkingPeak: e.workPeak}
}

// Expected is the seeds' table for n parameters on w ranks in mixed precision (2-byte
// parameters and gradients, fp32 master weights and moments, K = 12): DDP 16n, ZeRO-1
// 4n + 12n/w, ZeRO-2 2n + 14n/w, ZeRO-3 16n/w bytes per rank. With padding, pass the
// padded count: the Engine's Total then equals Expected exactly.
func Expected(stage int, n int64, w int) float64 { return ExpectedBytes(stage, n, w, 2) }

// ExpectedBytes generalises the table to p-byte working parameters and gradients. The
// optimizer state is K = 12 bytes (master, m, v) when p < 4, and K = 8 when p = 4,
// because fp32 working parameters are the master weights: DDP (2p+K)n, ZeRO-1
// 2pn + Kn/w, ZeRO-2 pn + (p+K)n/w, ZeRO-3 (2p+K)n/w.
func ExpectedBytes(stage int, n int64, w, p int) float64 {
	x, W, P, K := float64(n), float64(w), float64(p), 12.0
	if p >= 4 {
		K = 8
	}
	switch stage {
	case 0:
		return (2*P + K) * x
	case 1:
		return 2*P*x + K*x/W
	case 2:
		return P*x + (P+K)*x/W
	case 3:
		return (2*P + K) * x / W
	}
	return 0
}

// Table formats one row per rank for a report.
func Table(ms []Memory) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-5s %12s %12s %12s %12s %12s %12s %14s\n", "rank", "params", "grads", "master", "moments", "total", "working", "formula")
	for r, m := range ms {
		fmt.Fprintf(&b, "%-5d %12s %12s %12s %12s %12s %12s %14s\n", r, mib(m.Params), mib(m.Grads), mib(m.Master), mib(m.Moments),
			mib(m.Total()), mib(m.WorkingPeak), mib(int64(ExpectedBytes(m.Stage, m.N, m.World, m.ElemBytes))))
	}
	return b.String()
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
