package perf

import (
	"fmt"
	"strings"

	"github.com/goccl/goccl/transport"
)

// Collective is one nccl-tests test: its name, how it maps a byte size to element
// counts, and how it turns a time into bus bandwidth.
type Collective struct {
	// Name is the nccl-tests name without the "_perf" suffix ("all_reduce").
	Name string
	// Kind is the goccl collective it runs.
	Kind transport.Kind
	// Reduces is true when the test loops over reduction ops (-o); others print "none".
	Reduces bool
	// Rooted is true when the test loops over roots (-r); others print root -1.
	Rooted bool
	// perRank is true for the tests whose per-rank count is rounded down to 16 bytes.
	perRank bool
	// sendFull / recvFull: which buffer holds n per-rank chunks.
	sendFull, recvFull bool
	// busFactor returns busbw/algbw for n ranks (doc/PERFORMANCE.md of nccl-tests).
	busFactor func(n int) float64
}

func ringFactor(n int) float64   { return float64(n-1) / float64(n) }
func allredFactor(n int) float64 { return 2 * float64(n-1) / float64(n) }
func oneFactor(int) float64      { return 1 }

// Collectives lists the tests in nccl-tests' order of its binaries.
var Collectives = []*Collective{
	{Name: "all_reduce", Kind: transport.KindAllReduce, Reduces: true, busFactor: allredFactor},
	{Name: "all_gather", Kind: transport.KindAllGather, perRank: true, recvFull: true, busFactor: ringFactor},
	{Name: "broadcast", Kind: transport.KindBroadcast, Rooted: true, busFactor: oneFactor},
	{Name: "reduce_scatter", Kind: transport.KindReduceScatter, Reduces: true, perRank: true, sendFull: true, busFactor: ringFactor},
	{Name: "reduce", Kind: transport.KindReduce, Reduces: true, Rooted: true, busFactor: oneFactor},
	{Name: "alltoall", Kind: transport.KindAllToAll, perRank: true, sendFull: true, recvFull: true, busFactor: ringFactor},
	{Name: "scatter", Kind: transport.KindScatter, Rooted: true, perRank: true, sendFull: true, busFactor: ringFactor},
	{Name: "gather", Kind: transport.KindGather, Rooted: true, perRank: true, recvFull: true, busFactor: ringFactor},
	{Name: "sendrecv", Kind: transport.KindSendRecv, busFactor: oneFactor},
}

// CollectiveNames lists the valid test names, for errors and usage.
func CollectiveNames() []string {
	names := make([]string, len(Collectives))
	for i, c := range Collectives {
		names[i] = c.Name
	}
	return names
}

// LookupCollective accepts a test name as nccl-tests spells it, with or without the
// "_perf" suffix, and the underscore-free spellings ("allreduce", "all-reduce").
func LookupCollective(name string) (*Collective, error) {
	n := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "_perf"))
	squash := strings.NewReplacer("_", "", "-", "")
	for _, c := range Collectives {
		if squash.Replace(c.Name) == squash.Replace(n) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("perf: unknown collective %q (valid: %s)", name, strings.Join(CollectiveNames(), ", "))
}

// Program is the nccl-tests binary name printed in the header ("all_reduce_perf").
func (c *Collective) Program() string { return c.Name + "_perf" }

// Counts is how one size maps to element counts for a collective and world size,
// exactly as nccl-tests' getCollByteCount does it.
type Counts struct {
	Send, Recv int64 // elements in the send and receive buffers
	Param      int64 // the count passed to the collective (and printed)
	// SendInplace and RecvInplace are the in-place offsets per rank, in elements: the
	// send (or receive) buffer of rank r starts at r*offset inside the other buffer.
	SendInplace, RecvInplace int64
}

// CountsFor maps a size in bytes to counts: count = size/eltSize, and for the per-rank
// tests the per-rank count is count/n rounded down to a multiple of 16 bytes.
func (c *Collective) CountsFor(size int64, eltSize, n int) Counts {
	count := size / int64(eltSize)
	if !c.perRank {
		return Counts{Send: count, Recv: count, Param: count}
	}
	base := (count / int64(n)) &^ (16/int64(eltSize) - 1)
	k := Counts{Send: base, Recv: base, Param: base}
	if c.sendFull {
		k.Send = base * int64(n)
		if !c.recvFull {
			k.RecvInplace = base
		}
	}
	if c.recvFull {
		k.Recv = base * int64(n)
		if !c.sendFull {
			k.SendInplace = base
		}
	}
	return k
}

// Bytes is the size column: the larger of the two buffers.
func (k Counts) Bytes(eltSize int) int64 { return max(k.Send, k.Recv) * int64(eltSize) }

// Bandwidth returns algbw and busbw in GB/s (decimal) for a time in seconds, using the
// same byte count as nccl-tests' GetBw: count*eltSize, times n for the per-rank tests.
func (c *Collective) Bandwidth(k Counts, eltSize, n int, sec float64) (algBW, busBW float64) {
	bytes := float64(k.Param) * float64(eltSize)
	if c.perRank {
		bytes *= float64(n)
	}
	algBW = bytes / 1e9 / sec
	return algBW, algBW * c.busFactor(n)
}

// BusFactor is busbw/algbw for n ranks.
func (c *Collective) BusFactor(n int) float64 { return c.busFactor(n) }

// maxSweep bounds the sizes of one sweep: an additive step far below the range
// (-b 1 -e 1G -i 1) would otherwise run for ever and hold the whole list in memory.
const maxSweep = 1 << 20

// Sweep returns the sizes nccl-tests visits: from min, times factor when factor > 1,
// else plus step, while size <= max. It refuses sweeps that would never end, and
// those of more than maxSweep sizes.
func Sweep(minBytes, maxBytes, stepBytes, stepFactor int64) ([]int64, error) {
	switch {
	case minBytes < 0 || maxBytes < 0:
		return nil, fmt.Errorf("perf: sizes must not be negative (minbytes %d, maxbytes %d)", minBytes, maxBytes)
	case minBytes > maxBytes:
		return nil, fmt.Errorf("perf: minbytes %d is larger than maxbytes %d", minBytes, maxBytes)
	case stepFactor > 1 && minBytes == 0 && maxBytes > 0:
		return nil, fmt.Errorf("perf: -b 0 with -f %d never grows; use -b 1 or more, or an additive step (-f 1 -i N)", stepFactor)
	case stepFactor <= 1 && stepBytes <= 0 && maxBytes > minBytes:
		return nil, fmt.Errorf("perf: step %d bytes never reaches maxbytes; use -i 1 or more, or -f 2", stepBytes)
	case stepFactor <= 1 && (maxBytes-minBytes)/max(stepBytes, 1) >= maxSweep:
		return nil, fmt.Errorf("perf: -b %d -e %d -i %d is %d sizes, more than %d; use a larger step (-i) or -f 2",
			minBytes, maxBytes, stepBytes, (maxBytes-minBytes)/max(stepBytes, 1)+1, maxSweep)
	}
	var sizes []int64
	for size := minBytes; size <= maxBytes; {
		sizes = append(sizes, size)
		next := size + stepBytes
		if stepFactor > 1 {
			next = size * stepFactor
		}
		if next <= size { // overflow, or min == max == 0
			break
		}
		size = next
	}
	return sizes, nil
}

// WarmupSizes are the sizes warmed up before the timed sweep: from min doubling while
// <= max, whatever -f says (nccl-tests' TimeTest). A zero min is warmed once.
func WarmupSizes(minBytes, maxBytes int64) []int64 {
	var sizes []int64
	for size := minBytes; size <= maxBytes; size *= 2 {
		sizes = append(sizes, size)
		if size == 0 {
			break
		}
	}
	return sizes
}
