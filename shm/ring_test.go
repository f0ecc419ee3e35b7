//go:build linux

package shm

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
)

// A record is complete when its stamp, stored last, names its own stream position: the
// stamp a slot still holds from the lap before never passes for the next record's, and
// a written record carries its kind and its bytes.
func TestRecordStamps(t *testing.T) {
	const size = 4 << 10
	ctl := make([]byte, 512)
	data := make([]byte, size)
	r := newRing(ctl, data)
	kinds := []byte{kindInline, kindData, kindSingle, kindShort}
	for i := 0; i < 3*size/recordBytes; i++ {
		pos := uint64(i) * recordBytes
		kind := kinds[i%len(kinds)]
		old := atomic.LoadUint64(r.stampWord(pos))
		for _, k := range kinds {
			if old>>8 == stamp(pos, k)>>8 {
				t.Fatalf("position %d: the slot's old stamp %#x already reads as complete (lap %d)", pos, old, i*recordBytes/size)
			}
		}
		var rec [recordBytes]byte
		binary.LittleEndian.PutUint64(rec[0:], pos^0xabcdef) // stands for the frame header
		copy(rec[recInline:], "payload!")
		r.putRecord(pos, &rec, kind)
		got := atomic.LoadUint64(r.stampWord(pos))
		if got != stamp(pos, kind) || byte(got) != kind {
			t.Fatalf("position %d: stamp %#x, want %#x (kind %d)", pos, got, stamp(pos, kind), kind)
		}
		slot := r.span(pos, recordBytes)
		if binary.LittleEndian.Uint64(slot) != pos^0xabcdef || string(slot[recInline:recInline+8]) != "payload!" {
			t.Fatalf("position %d: the record's bytes were not written", pos)
		}
	}
}
