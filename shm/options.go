package shm

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccl/goccl/transport"
)

// Switch is a setting that is on, off, or left to the transport (auto).
type Switch uint8

const (
	// SwitchAuto leaves it to the transport.
	SwitchAuto Switch = iota
	// SwitchOff is off.
	SwitchOff
	// SwitchOn is on.
	SwitchOn
)

func (s Switch) String() string {
	switch s {
	case SwitchOff:
		return "false"
	case SwitchOn:
		return "true"
	}
	return "auto"
}

// SingleCopy says when a large message skips the ring and is read by the receiver
// straight out of the sender's memory (process_vm_readv).
type SingleCopy = Switch

const (
	// SingleCopyAuto uses single-copy for messages of at least SingleCopyMin bytes and
	// falls back to the ring, for the rest of the link's life, when the kernel refuses it.
	SingleCopyAuto = SwitchAuto
	// SingleCopyOff always copies through the ring.
	SingleCopyOff = SwitchOff
	// SingleCopyOn is SingleCopyAuto, except that a refusal by the kernel is an error
	// instead of a silent fallback (for tests and for users who want to know).
	SingleCopyOn = SwitchOn
)

// Options are the shm transport's settings. They come from transport.Params keys
// "shm.<name>" (see ParseOptions); the zero value of a field means its default.
type Options struct {
	// Dir holds the segments ("shm.dir", default /dev/shm). It must be a tmpfs or
	// another file system whose pages are shared memory.
	Dir string
	// RingBytes is each direction's ring size ("shm.ring_bytes", a power of two
	// between 64 KiB and 1 GiB; default 4 MiB).
	RingBytes int
	// ChunkBytes is the pipelining unit ("shm.chunk_bytes", a multiple of 64 between
	// 4 KiB and RingBytes/2; default 64 KiB): the sender publishes each chunk as soon as
	// it is written, so the receiver consumes one while the next is being copied.
	ChunkBytes int
	// SingleCopy is "shm.single_copy": auto (default), true or false.
	SingleCopy SingleCopy
	// SingleCopyMin is the smallest message sent single-copy ("shm.single_copy_min",
	// default 32 MiB; a message of up to 2 KiB goes with its record whatever it says). On the 2-core development VM the ring is faster up to 16 MiB
	// one-way (its two copies run on both cores in parallel and stay in L3) and the two
	// paths are even beyond; at 32 MiB and up single-copy is not slower and moves half
	// the bytes through memory. The default is above RingBytes on purpose: such a Send
	// would block on a slow receiver through the ring too, so single-copy's
	// wait-for-the-reader adds no new way to block.
	SingleCopyMin int
	// Spin is how long a waiting rank polls before it sleeps on a futex ("shm.spin",
	// a Go duration, default 50µs): a futex wake-up costs 25-50 µs in a VM, so a short
	// spin keeps small-message latency low while an idle rank still burns no CPU. After
	// the first 2 µs every poll yields the CPU first, so a peer that the kernel queued
	// on this rank's core runs at once instead of after the spin (BENCHMARKS.md, "Speed").
	Spin time.Duration
	// DirectMin is the smallest collective that reads peers' buffers directly when every
	// rank's buffers are in memory from Comm.AllocShared ("shm.direct_min"; "off" never
	// does): below it the three hand-shakes such a collective makes cost more than the
	// copies through the ring it saves. Unset (0), the communicator picks by its size
	// (DirectMinFor); ParseOptions turns "off" into -1 and "0" (every non-empty
	// collective) into 1.
	DirectMin int
	// StagedMin is the smallest AllReduce of ordinary (not AllocShared) buffers that auto
	// runs through the communicator's staging area ("shm.staged_min"; algos/staged) when
	// every link is shm; "off" never does, and leaves the communicator without a staging
	// area (so AllGather, ReduceScatter and Broadcast, which auto stages by their own
	// rules, StagedGatherFor and StagedBroadcastMinFor, do not either). Unset (0), the communicator picks by its size
	// (StagedMinFor); ParseOptions turns "off" into -1 and "0" into 1.
	StagedMin int
	// StagedMax is the largest AllReduce that auto runs through the staging area
	// ("shm.staged_max"; "none" or 0: no bound, math.MaxInt here). Unset (0), there is no
	// bound, unless a tune file (Config.TuneFile) has a staged range for the world size:
	// on some hosts the ring is faster at large sizes (BENCHMARKS.md, "Speed", 19).
	StagedMax int
	// StagingBytes is each rank's part of the staging area ("shm.staging_bytes"): two
	// windows of half that, used in turn. Unset (0), the communicator picks by its size
	// (StagingBytesFor).
	StagingBytes int
	// StreamStores is "shm.stream_stores": auto (default), true or false. True copies a
	// payload into the ring with non-temporal stores, which send its lines to memory
	// instead of leaving them dirty in the sender's cache, where the receiver on
	// another core would have to fetch them one by one. Auto does so while ranks do not
	// outnumber the CPUs (Options.Streams).
	StreamStores Switch
	// LocalRanks is the number of ranks on this host ("shm.local_ranks", default the
	// "local_world_size" the communicator passes, else the number of shm links + 1).
	// When ranks outnumber the cores, waiting ranks yield the CPU while they spin.
	LocalRanks int
}

// Defaults, measured on the 2-core development VM (see the package benchmarks).
const (
	defaultDir           = "/dev/shm"
	defaultRingBytes     = 4 << 20
	defaultChunkBytes    = 64 << 10
	defaultSingleCopyMin = 32 << 20
	defaultSpin          = 50 * time.Microsecond
	directOff            = -1
	stagedOff            = -1
	minStagingBytes      = 4 << 10
	maxStagingBytes      = 1 << 30

	minRingBytes  = 64 << 10
	maxRingBytes  = 1 << 30
	minChunkBytes = 4 << 10
	chunkAlign    = 64 // ring records are 64 bytes; chunks keep them aligned
	maxSpin       = time.Second
)

// paramKeys lists every key ParseOptions understands, for error messages.
var paramKeys = []string{"shm.dir", "shm.ring_bytes", "shm.chunk_bytes", "shm.single_copy",
	"shm.single_copy_min", "shm.stream_stores", "shm.spin", "shm.local_ranks", "shm.direct_min", "shm.staged_min", "shm.staged_max", "shm.staging_bytes"}

// ParseOptions reads the "shm.*" keys of p (other keys are left to other transports) and
// fills in defaults. A malformed value or an unknown "shm." key is an error that names
// the key and what it accepts.
func ParseOptions(p transport.Params) (Options, error) {
	o := Options{}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.TrimSpace(p[k])
		var err error
		switch k {
		case "shm.dir":
			if !strings.HasPrefix(v, "/") {
				err = fmt.Errorf("want an absolute directory such as /dev/shm")
			}
			o.Dir = v
		case "shm.ring_bytes":
			o.RingBytes, err = transport.ParseBytes(v)
		case "shm.chunk_bytes":
			o.ChunkBytes, err = transport.ParseBytes(v)
		case "shm.single_copy":
			o.SingleCopy, err = parseSwitch(v)
		case "shm.stream_stores":
			o.StreamStores, err = parseSwitch(v)
		case "shm.single_copy_min":
			o.SingleCopyMin, err = transport.ParseBytes(v)
			if err == nil && o.SingleCopyMin == 0 {
				o.SingleCopyMin = 1 // "0" means every non-empty message
			}
		case "shm.spin":
			o.Spin, err = time.ParseDuration(v)
			if err == nil && (o.Spin < 0 || o.Spin > maxSpin) {
				err = fmt.Errorf("want a duration between 0 and %v", maxSpin)
			}
			if err == nil && o.Spin == 0 {
				o.Spin = -1 // explicit "no spinning", distinct from unset
			}
		case "shm.direct_min":
			if strings.EqualFold(v, "off") {
				o.DirectMin = directOff
				break
			}
			o.DirectMin, err = transport.ParseBytes(v)
			if err == nil && o.DirectMin == 0 {
				o.DirectMin = 1 // "0" means every size
			}
			if err != nil {
				err = fmt.Errorf("want a size such as 64K, 0 (every size) or off")
			}
		case "shm.staged_min":
			if strings.EqualFold(v, "off") {
				o.StagedMin = stagedOff
				break
			}
			o.StagedMin, err = transport.ParseBytes(v)
			if err == nil && o.StagedMin == 0 {
				o.StagedMin = 1 // "0" means every size
			}
			if err != nil {
				err = fmt.Errorf("want a size such as 4M, 0 (every size) or off")
			}
		case "shm.staged_max":
			if strings.EqualFold(v, "none") {
				o.StagedMax = math.MaxInt
				break
			}
			o.StagedMax, err = transport.ParseBytes(v)
			if err == nil && o.StagedMax == 0 {
				o.StagedMax = math.MaxInt // "0" means no bound
			}
			if err != nil {
				err = fmt.Errorf("want a size such as 16M, or 0 or none (no bound)")
			}
		case "shm.staging_bytes":
			o.StagingBytes, err = transport.ParseBytes(v)
			if err == nil && (o.StagingBytes < minStagingBytes || o.StagingBytes > maxStagingBytes) {
				err = fmt.Errorf("want a size between %d and %d bytes", minStagingBytes, maxStagingBytes)
			}
		case "shm.local_ranks":
			o.LocalRanks, err = strconv.Atoi(v)
			if err == nil && o.LocalRanks < 1 {
				err = fmt.Errorf("want a positive integer")
			}
		case "local_world_size":
			// Set by the communicator; only a hint, so a bad value is ignored.
			if n, e := strconv.Atoi(v); e == nil && n > 0 && p["shm.local_ranks"] == "" {
				o.LocalRanks = n
			}
		default:
			if strings.HasPrefix(k, "shm.") {
				return Options{}, fmt.Errorf("shm: %w: unknown parameter %q (valid: %s)",
					transport.ErrInvalid, k, strings.Join(paramKeys, ", "))
			}
		}
		if err != nil {
			return Options{}, fmt.Errorf("shm: %w: parameter %s=%q: %v", transport.ErrInvalid, k, p[k], err)
		}
	}
	return o.withDefaults()
}

// parseSwitch reads auto, true or false (and on/off, 1/0, yes/no).
func parseSwitch(v string) (Switch, error) {
	switch strings.ToLower(v) {
	case "auto", "":
		return SwitchAuto, nil
	case "true", "on", "1", "yes":
		return SwitchOn, nil
	case "false", "off", "0", "no":
		return SwitchOff, nil
	}
	return SwitchAuto, fmt.Errorf("want auto, true or false")
}

// withDefaults fills unset fields and checks the combination.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		o.Dir = defaultDir
	}
	if o.RingBytes == 0 {
		o.RingBytes = defaultRingBytes
	}
	if o.ChunkBytes == 0 {
		o.ChunkBytes = min(defaultChunkBytes, o.RingBytes/2)
	}
	if o.SingleCopyMin == 0 {
		o.SingleCopyMin = defaultSingleCopyMin
	}
	if o.Spin == 0 {
		o.Spin = defaultSpin
	}

	if o.Spin < 0 {
		o.Spin = 0
	}
	if o.RingBytes < minRingBytes || o.RingBytes > maxRingBytes || bits.OnesCount(uint(o.RingBytes)) != 1 {
		return Options{}, fmt.Errorf("shm: %w: shm.ring_bytes=%d: want a power of two between %d and %d",
			transport.ErrInvalid, o.RingBytes, minRingBytes, maxRingBytes)
	}
	if o.ChunkBytes < minChunkBytes || o.ChunkBytes > o.RingBytes/2 || o.ChunkBytes%chunkAlign != 0 {
		return Options{}, fmt.Errorf("shm: %w: shm.chunk_bytes=%d: want a multiple of %d between %d and shm.ring_bytes/2 = %d",
			transport.ErrInvalid, o.ChunkBytes, chunkAlign, minChunkBytes, o.RingBytes/2)
	}
	return o, nil
}

// DirectMinFor is shm.direct_min's default for a communicator of world ranks, measured
// on the 2-core development VM (BENCHMARKS.md, "Speed", 11): at 2 ranks the direct
// algorithm ties the ring at 64-128 KiB and wins from 256 KiB; at 4 ranks, where the
// ring takes 2(W-1) steps, it wins from 64 KiB and loses at 16 KiB.
func DirectMinFor(world int) int {
	if world <= 2 {
		return 256 << 10
	}
	return 64 << 10
}

// oversubscribed reports whether ranks outnumber the CPUs they may use, given the
// number of shm links this rank has (a lower bound on the local ranks). Ranks in
// separate processes share the host's CPUs (runtime.NumCPU, the affinity mask);
// GOMAXPROCS bounds only the goroutine ranks of one process, so it counts only when
// the peer is one (a launcher that sets GOMAXPROCS=1 per rank process is not
// oversubscribed on two cores with two ranks).
func (o Options) oversubscribed(links int, samePid bool) bool {
	n := o.LocalRanks
	if n == 0 {
		n = links + 1
	}
	if samePid {
		return n > min(runtime.NumCPU(), runtime.GOMAXPROCS(0))
	}
	return n > runtime.NumCPU()
}

// Streams reports whether payloads go into the ring with non-temporal stores, for a
// rank with links shm links (a lower bound on the local ranks) whose peers are
// goroutines of this process when samePid. Auto streams while ranks do not outnumber
// the CPUs: then the receiver runs on another core at the same time, and on the 2-core
// development VM a line it reads from memory came 2-3x faster than one still dirty in
// the sender's cache (one-way 64 KiB-16 MiB: 19-25 GB/s streamed against 7-8; a 2-rank
// ring AllReduce 1.4-2.5x faster; BENCHMARKS.md, "Speed", 23). When ranks share cores
// the receiver often runs where the sender ran, and finds the lines in the cache that
// streaming would have emptied (3 and 4 ranks on 2 cores: up to 1.45x slower
// streamed).
func (o Options) Streams(links int, samePid bool) bool {
	switch o.StreamStores {
	case SwitchOn:
		return true
	case SwitchOff:
		return false
	}
	return !o.oversubscribed(links, samePid)
}

// StagedMinFor is shm.staged_min's default for a communicator of world ranks, measured
// on the 2-core development VM with bench/auto.sh, whose sweeps move the buffers from
// call to call as nccl-tests does (BENCHMARKS.md, "Speed", 17; 8 rounds on its AMD
// host, two threads copying 25-37 GB/s): the staged AllReduce was the fastest algorithm
// from 128 KiB at 2 and 4 ranks (the ring 1.2x faster at 32-64 KiB at 2, naive 1.1x at
// 4) and within 5 % of naive from 256 KiB at 3 (naive 1.17x faster at 128 KiB);
// measured to 4 ranks, so the 4-rank default beyond. On the earlier, slower host
// ("Speed", 16) it led from 16 and 32 KiB, where a hand-off between ranks cost more. On
// an Intel host the ring was faster from 8 MiB at 2 ranks one day and staged tied or
// led there the next, and staged was 1.14-1.69x faster than this default's pick at
// 32-128 KiB at 3 ranks and 16-64 KiB at 4 ("Speed", 19 and 20).
//
// From 3 ranks it starts at 256 KiB. At 3 ranks it started at 16 MiB until "Speed",
// 48a: on the AMD family 26 host naive was 1.09-1.28x faster than staged at 256-512 KiB
// ("Speed", 27 and 28), and from 1 to 8 MiB the ring took 0.87-0.93x staged's time in
// 11 rounds of bench/auto.sh over two days, and 0.61-0.84x in single-size launches
// ("Speed", 38c). On the two hosts since, the order turned. In all ten runs of
// bench/auto.sh there (auto48 and auto49 on the Intel host, auto50-auto57 on the AMD
// family 25 host; "Speed", 48a) staged never took more than 1.03x the fastest other
// algorithm's time at 3 ranks from 256 KiB to 8 MiB. The ring or naive took 0.97-1.48x
// staged's time at 256 KiB, 1.04-1.30x at 512 KiB and 1.08-1.87x at 1-8 MiB. At 128 KiB
// naive was up to 1.39x faster. Two hosts of three favour staged there, by more than
// the third loses, and `goccl tune` or algo_tune: online finds the order on a host like
// that one. From 4 ranks: at 128 KiB naive took 0.81x staged's time in 15 rounds of
// bench/auto.sh over two days, and 0.92x in single-size launches ("Speed", 38d). Where a
// host differs, `goccl tune` measures the range (a tune file's staged range replaces
// this default), or set shm.staged_min and shm.staged_max.
//
// stream says that every rank's links stream their payloads (Options.Streams). At 2
// ranks the ring is then faster at every size from 32 KiB (1.6-2x: BENCHMARKS.md,
// "Speed", 23), and auto never stages an AllReduce (math.MaxInt).
func StagedMinFor(world int, stream bool) int {
	switch {
	case world == 2 && stream:
		return math.MaxInt
	case world >= 3:
		return 256 << 10
	}
	return 128 << 10
}

// StagedGatherFor reports whether auto runs an AllGather or ReduceScatter of bytes
// (counted as nccl-tests' size column: the whole world's data) through the communicator's
// staging area, for a communicator of world ranks: from 4 MiB at 3 ranks and from 128 KiB
// at 4 and more; at 2, unless the links stream, from 8 MiB. shm.staged_min and
// shm.staged_max bound the staged AllReduce only; "off" turns the staging area off for
// every collective.
//
// A ring AllGather rank writes (W-1)/W of its output into the links' buffers, reads it
// back and writes it out, 3(W-1)/W per byte in all; through the staging area it writes
// only its own block in, (2W-1)/W, and meets its peers at one hand-shake per window
// instead of at every step of every chunk, which is what costs when ranks outnumber
// cores. ReduceScatter likewise. When this was first measured (10 rounds of bench/auto.sh,
// BENCHMARKS.md, "Speed", 21) staged was the fastest fixed algorithm or within 4 % of it
// at every non-empty size at 3 and 4 ranks, and auto staged every size there, and at 2
// ranks up to 64 KiB.
//
// Since then small messages over shm got cheaper (their records, the fast paths:
// "Speed", 34 and 35), and staged's hand-shakes did not. Two rounds of each collective
// ("Speed", 35f) put the ring ahead of staged at 2 ranks at every size from 32 B to 64
// KiB (staged 1.2-2.3x its time), the ring ahead at 3 ranks up to 1-2 MiB (staged
// 1.1-1.8x), and naive or the ring ahead at 4 ranks up to 32-64 KiB (staged 1.2-3.5x).
// Staged led at 3 ranks from 4 MiB (ReduceScatter; AllGather from 32 MiB) and at 4
// from 512 KiB at most sizes. Two more rounds at 4 ranks ("Speed", 36a) put staged
// first, or within 5 % of naive, at 128 and 256 KiB too (the medians of all six:
// 50 and 76 us against naive's 67 and 96 and the ring's 89 and 130 for AllGather, 63
// and 99 against 68 and 116, and 91 and 125, for ReduceScatter).
//
// With stream (see StagedMinFor) the ring is faster from 256 KiB at 2 ranks (1.6-3.9x up
// to 4 MiB and 1.1-1.7x at 16 and 64 MiB in one launch: "Speed", 23), so a 2-rank
// communicator whose links stream never stages them.
func StagedGatherFor(world, bytes int, stream bool) bool {
	switch {
	case bytes < 1 || world < 2:
		return false
	case world == 2:
		return !stream && bytes >= 8<<20
	case world == 3:
		return bytes >= 4<<20
	}
	return bytes >= 128<<10
}

// StagedBroadcastMinFor is the smallest Broadcast that auto runs through the
// communicator's staging area, for a communicator of world ranks: 16 MiB at 2, 8 MiB from
// 3. The root writes each window into its part once and every other rank copies it out,
// against the ring's chain, where every rank but the last also copies each chunk into
// the next link's buffer. Smaller ones stay with the tree, ring or naive, which need no
// hand-shake: a Broadcast's root does not wait for its receivers, and calls in a row
// overlap. In 12 rounds of bench/auto.sh (BENCHMARKS.md, "Speed", 21) staged was the
// fastest from 16 MiB at 2 ranks (the ring 1.11-1.32x slower) and from 8 MiB at 3 and 4
// (the ring 1.59-2.74x slower), and 1.1-2.6x slower than the fastest at 1-4 MiB but at 4
// ranks and 4 MiB.
//
// With stream (see StagedMinFor) the ring is faster at 2 ranks at every size measured,
// to 64 MiB ("Speed", 23), and a 2-rank Broadcast never stages (math.MaxInt).
func StagedBroadcastMinFor(world int, stream bool) int {
	switch {
	case world == 2 && stream:
		return math.MaxInt
	case world == 2:
		return 16 << 20
	}
	return 8 << 20
}

// StagingBytesFor is shm.staging_bytes's default for a communicator of world ranks: 8
// MiB per rank up to 4 ranks, then 32 MiB over the ranks, at least 2 MiB. Larger parts
// mean fewer windows, and every window costs two hand-shakes, which is what counts when
// ranks outnumber cores (on the 2-core VM 8 MiB parts beat 2 and 4 MiB ones by a fifth
// at 3 and 4 ranks and tie them at 2: BENCHMARKS.md, "Speed", 16); the bound keeps the
// whole area, every rank's part, near 32 MiB of shm.dir on a big host.
func StagingBytesFor(world int) int {
	return min(8<<20, max(2<<20, (32<<20)/max(world, 1)))
}
