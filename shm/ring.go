//go:build linux

package shm

import (
	"github.com/goccl/goccl/internal/streamcopy"

	"sync/atomic"
	"unsafe"
)

// A ring is one direction of a link: a single-producer single-consumer byte ring in
// shared memory. head counts bytes the producer has published, tail bytes the consumer
// has released; both only grow (uint64 does not wrap in practice), the free space is
// size-(head-tail). Every message starts with a 64-byte record (the 40-byte frame
// header, a kind byte and an inline payload or a remote address), and every record
// starts on a 64-byte boundary, so a record never straddles the ring's end and every
// piece handed to a RecvStream callback starts at a multiple of 64 bytes of its message.
//
// A record is complete when its stamp, stored last, names its position. A payload of up
// to inlineMax bytes rides inside its record (kindInline), and one of up to shortMax in
// the lines after it, written before the stamp (kindShort): the consumer of either needs
// the stamp alone, and the producer stores no head for them (a later publish covers
// them). A longer payload (kindData) follows its record chunk by chunk, each chunk
// published through head, so the consumer copies one chunk while the next is written.
// For a small payload head only costs another line between the cores: the two-rank
// AllReduce of 1 KiB took 1.25 us as a data record and 0.80 as a short one. From 4 KiB
// the short record was the slower (1.6 against 1.8-2.0 us; at 16 KiB 2.5 against
// 4.1), for a reason not pinned down: its consumer polls the record line beside the
// lines being written, a data record's polls head (BENCHMARKS.md, "Speed", 34).
//
// Waiting uses an eventcount per side: the waiter reads seq, raises its waiting flag,
// re-checks the condition and sleeps on seq; the other side, after moving head or tail,
// bumps seq and wakes only when the flag is up. Go atomics are sequentially consistent,
// so either the waiter sees the new head/tail or the mover sees the flag.
type ring struct {
	head        *uint64 // producer-owned line
	tail        *uint64 // consumer-owned line
	consWaiting *uint32 // consumer sleeps on dataSeq while set
	dataSeq     *uint32
	prodWaiting *uint32 // producer sleeps on spaceSeq while set
	spaceSeq    *uint32
	scStatus    *uint32 // consumer -> producer: outcome of the last single-copy read
	data        []byte
	size        uint64
	mask        uint64
	race        *uint64 // race builds: see race_on.go (nil otherwise)
}

// Record layout and kinds.
const (
	recordBytes = 64
	recStamp    = 40 // uint64: kind | (position/64+1)<<8, stored last (see ring)
	recAddr     = 48 // uint64: the sender's payload address (kindSingle)
	recInline   = 48 // payload bytes (kindInline)
	inlineMax   = recordBytes - recInline
	shortMax    = 2 << 10 // the largest kindShort payload

	kindData   = 1 // payload follows the record, padded to 64 bytes, published by head
	kindInline = 2 // payload inside the record
	kindSingle = 3 // receiver reads the payload from the sender's memory, then releases the record
	kindShort  = 4 // payload follows the record, padded to 64 bytes, written before the stamp
)

// Control block offsets, each written by one side only, one cache line apart.
const (
	cHead        = 0
	cTail        = 64
	cConsWaiting = 128
	cDataSeq     = 132
	cProdWaiting = 192
	cSpaceSeq    = 196
	cSCStatus    = 256
)

// Single-copy outcomes in scStatus, written by the consumer before it releases a
// kindSingle record.
const (
	scDone    = 0 // read; the sender may return
	scRefused = 1 // the kernel refused; resend through the ring
	scFatal   = 2 // refused and single-copy is required: the link is failing
)

func newRing(ctl, data []byte) *ring {
	w32 := func(off int) *uint32 { return (*uint32)(unsafe.Pointer(&ctl[off])) }
	return &ring{
		head:        (*uint64)(unsafe.Pointer(&ctl[cHead])),
		tail:        (*uint64)(unsafe.Pointer(&ctl[cTail])),
		consWaiting: w32(cConsWaiting),
		dataSeq:     w32(cDataSeq),
		prodWaiting: w32(cProdWaiting),
		spaceSeq:    w32(cSpaceSeq),
		scStatus:    w32(cSCStatus),
		data:        data,
		size:        uint64(len(data)),
		mask:        uint64(len(data) - 1),
	}
}

// pad rounds n up to whole records.
func pad(n int) int { return (n + recordBytes - 1) &^ (recordBytes - 1) }

// put copies src into the ring at stream position pos, wrapping at the end; with
// stream, through non-temporal stores (Options.Streams), which are ordered before the
// publishing store by put's own fence.
func (r *ring) put(pos uint64, src []byte, stream bool) {
	i := pos & r.mask
	k := copyStream(r.data[i:], src, stream)
	if k < len(src) {
		copyStream(r.data, src[k:], stream)
	}
}

func copyStream(dst, src []byte, stream bool) int {
	if stream {
		return streamcopy.Copy(dst, src)
	}
	return copy(dst, src)
}

// span returns up to n bytes at stream position pos that do not cross the ring's end.
func (r *ring) span(pos uint64, n int) []byte {
	i := pos & r.mask
	return r.data[i : i+min(uint64(n), r.size-i)]
}

// stamp is the stamp of a record of kind at stream position pos.
func stamp(pos uint64, kind byte) uint64 { return (pos/recordBytes+1)<<8 | uint64(kind) }

// stampWord is the stamp word of the record at stream position pos.
func (r *ring) stampWord(pos uint64) *uint64 {
	return (*uint64)(unsafe.Pointer(&r.data[(pos&r.mask)+recStamp]))
}

// putRecord writes rec (its stamp word zero) at stream position pos and then its stamp,
// which completes it for the consumer. Records never straddle the ring's end.
func (r *ring) putRecord(pos uint64, rec *[recordBytes]byte, kind byte) {
	copy(r.data[pos&r.mask:], rec[:])
	raceRelease(r.race)
	atomic.StoreUint64(r.stampWord(pos), stamp(pos, kind))
}

// publish makes everything before head visible to the consumer.
func (r *ring) publish(head uint64) {
	raceRelease(r.race)
	atomic.StoreUint64(r.head, head)
	if atomic.LoadUint32(r.consWaiting) != 0 {
		atomic.AddUint32(r.dataSeq, 1)
		futexWake(r.dataSeq)
	}
}

// wakeConsumer wakes a consumer sleeping for data.
func (r *ring) wakeConsumer() {
	if atomic.LoadUint32(r.consWaiting) != 0 {
		atomic.AddUint32(r.dataSeq, 1)
		futexWake(r.dataSeq)
	}
}

// release hands everything before tail back to the producer.
func (r *ring) release(tail uint64) {
	atomic.StoreUint64(r.tail, tail)
	if atomic.LoadUint32(r.prodWaiting) != 0 {
		atomic.AddUint32(r.spaceSeq, 1)
		futexWake(r.spaceSeq)
	}
}

// wake rouses both sides of the ring whatever their flags say (close and failure).
func (r *ring) wake() {
	atomic.AddUint32(r.dataSeq, 1)
	futexWake(r.dataSeq)
	atomic.AddUint32(r.spaceSeq, 1)
	futexWake(r.spaceSeq)
}
