package goccl

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/goccl/goccl/transport"
)

// FuzzBatchChecks feeds arbitrary ops to BatchSendRecv's checks and arbitrary counts to
// AllToAllV's, on a communicator of 1 to 5 ranks that never connects. A refusal wraps
// ErrInvalid (or ErrMismatch for a send to itself whose receive differs), never a
// panic; and what passes has every peer inside the communicator, every buffer long
// enough, sends to itself paired with receives of the same size, and no two receives
// on the same bytes (checked here pair by pair, apart from the sorted check).
func FuzzBatchChecks(f *testing.F) {
	f.Add(uint8(3), uint8(1), []byte{1, 0, 3, 8, 0, 64, 0, 0, 0, 2, 1, 3, 8, 0, 32, 0, 16, 0})
	f.Add(uint8(2), uint8(0), []byte{0, 0, 7, 4, 0, 16, 0, 0, 0, 0, 1, 7, 4, 0, 16, 0, 8, 0})
	f.Add(uint8(4), uint8(3), []byte{9, 1, 2, 255, 255, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, world, rank uint8, data []byte) {
		w := 1 + int(world)%5
		c := &Comm{rank: int(rank) % w, size: w}
		arena := make([]byte, 1<<16)
		// Each op is 9 bytes: peer (int8), flags (bit 0 receive, bit 1 device memory),
		// dtype, count (int16), buffer length and offset into the arena (uint16 each).
		var ops []P2POp
		var offs []int // where each op's buffer starts in the arena (its device's, for device memory)
		for len(data) >= 9 {
			b := data[:9]
			data = data[9:]
			n, off := int(binary.LittleEndian.Uint16(b[5:])), int(binary.LittleEndian.Uint16(b[7:]))
			n = min(n, len(arena)-off)
			buf := Host(arena[off : off+n])
			if b[1]&2 != 0 {
				buf = DeviceBuffer(uintptr(1<<40+off), n, int(b[2]>>4))
			}
			ops = append(ops, P2POp{Peer: int(int8(b[0])), Recv: b[1]&1 != 0, Buf: buf, DType: DType(b[2] & 15),
				Count: int(int16(binary.LittleEndian.Uint16(b[3:])))})
			offs = append(offs, off)
		}
		if err := c.checkBatch(ops); err != nil {
			if !errors.Is(err, transport.ErrInvalid) && !errors.Is(err, transport.ErrMismatch) {
				t.Fatalf("ops %v: error %v wraps neither ErrInvalid nor ErrMismatch", ops, err)
			}
		} else {
			checkPassedBatch(t, c, ops, offs)
		}
		// AllToAllV: counts from the ops' counts, buffers from their lengths.
		if len(ops) < 2 {
			return
		}
		a := &allToAllV{send: ops[0].Buf, recv: ops[1].Buf, dt: ops[0].DType}
		for i := range 2 * w {
			x := ops[i%len(ops)].Count
			if i < w {
				a.sendCounts = append(a.sendCounts, x)
			} else {
				a.recvCounts = append(a.recvCounts, x)
			}
		}
		if len(ops)%3 == 0 {
			a.recvCounts = a.recvCounts[1:] // a count too few
		}
		sendN, recvN, err := c.checkAllToAllV(a)
		if err != nil {
			if !errors.Is(err, transport.ErrInvalid) {
				t.Fatalf("alltoallv %v: error %v does not wrap ErrInvalid", a, err)
			}
			return
		}
		s, r := 0, 0
		for p := range w {
			if a.sendCounts[p] < 0 || a.recvCounts[p] < 0 {
				t.Fatalf("alltoallv %v passed with a negative count", a)
			}
			s, r = s+a.sendCounts[p], r+a.recvCounts[p]
		}
		esz := a.dt.Size()
		if sendN != s*esz || recvN != r*esz || a.send.Len() < sendN || a.recv.Len() < recvN || a.sendCounts[c.rank] != a.recvCounts[c.rank] {
			t.Fatalf("alltoallv %v passed with sizes %d and %d", a, sendN, recvN)
		}
	})
}

// checkPassedBatch fails t unless ops, which checkBatch passed, are what it promises.
func checkPassedBatch(t *testing.T, c *Comm, ops []P2POp, offs []int) {
	var selfSends, selfRecvs []P2POp
	for _, o := range ops {
		if o.Peer < 0 || o.Peer >= c.size || !o.DType.Valid() || o.Count < 0 || o.Count*o.DType.Size() > o.Buf.Len() {
			t.Fatalf("passed: %v", o)
		}
		if o.Peer == c.rank && o.Recv {
			selfRecvs = append(selfRecvs, o)
		} else if o.Peer == c.rank {
			selfSends = append(selfSends, o)
		}
	}
	if len(selfSends) != len(selfRecvs) {
		t.Fatalf("passed %d sends to itself and %d receives: %v", len(selfSends), len(selfRecvs), ops)
	}
	for k := range selfSends {
		if selfSends[k].Count != selfRecvs[k].Count || selfSends[k].DType != selfRecvs[k].DType {
			t.Fatalf("passed %v paired with %v", selfSends[k], selfRecvs[k])
		}
	}
	space := func(o P2POp) int {
		if o.Buf.Kind() == transport.Host {
			return -1
		}
		return o.Buf.DeviceOrdinal()
	}
	for i, a := range ops {
		for j := i + 1; j < len(ops); j++ {
			b := ops[j]
			na, nb := a.Count*a.DType.Size(), b.Count*b.DType.Size()
			if a.Recv && b.Recv && na > 0 && nb > 0 && space(a) == space(b) && offs[i] < offs[j]+nb && offs[j] < offs[i]+na {
				t.Fatalf("passed two receives on the same bytes: %v at %d and %v at %d", a, offs[i], b, offs[j])
			}
		}
	}
	// receivesInto (the binary search runBatch asks whether a send's memory is
	// written) against every host receive, for each host op's bytes.
	for i, a := range ops {
		if a.Buf.Kind() != transport.Host {
			continue
		}
		p := a.Buf.Bytes()[:a.Count*a.DType.Size()]
		want := false
		for j, b := range ops {
			nb := b.Count * b.DType.Size()
			want = want || b.Recv && b.Buf.Kind() == transport.Host && len(p) > 0 && nb > 0 && offs[i] < offs[j]+nb && offs[j] < offs[i]+len(p)
		}
		if got := c.receivesInto(p); got != want {
			t.Fatalf("receivesInto(op %d: %v at %d) = %v, want %v; ops %v", i, a, offs[i], got, want, ops)
		}
	}
}
