// Package p2ptest makes the data of AllToAllV and BatchSendRecv tests: what each rank
// sends each other rank (a formula of sender, receiver, message and index, so that a
// receiver checks every byte without the sender's copy), uneven counts, and random
// batches of messages with each rank's ops in a random order. The goccl package's tests
// and e2e's rank program (between real processes) use it.
package p2ptest

import (
	"fmt"
	"math/rand/v2"

	"github.com/goccl/goccl/transport"
)

// Value is element i of the block rank src sends rank dst in message m: what every
// receive is checked against, computed apart from the data that travelled.
func Value(src, dst, m, i int) int64 {
	return int64(src)<<48 ^ int64(dst)<<40 ^ int64(m)<<32 ^ int64(i)*2654435761
}

// Bytes is the little-endian bytes of values, cut to n bytes: the payload of a
// message of any dtype.
func Bytes(n, src, dst, m int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := Value(src, dst, m, i/8)
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// Check compares got, what rank dst received of message m from rank src, with Bytes.
func Check(got []byte, src, dst, m int) error {
	want := Bytes(len(got), src, dst, m)
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("message %d from rank %d to rank %d: byte %d of %d is %#x, want %#x", m, src, dst, i, len(got), got[i], want[i])
		}
	}
	return nil
}

// DTypes are the element sizes the tests cover: 1, 2, 4 and 8 bytes.
var DTypes = []transport.DType{transport.Int8, transport.Float16, transport.BFloat16, transport.Float32, transport.Int32, transport.Uint64, transport.Float64}

// AllToAllVCount is the elements rank src sends rank dst in AllToAllV number round: 0, 1,
// odd, not a multiple of anything, and one large block.
func AllToAllVCount(src, dst, round, world int, large int) int {
	switch (src*7 + dst*3 + round) % 5 {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return 2*src + 3*dst + 1
	case 3:
		if src == (dst+1)%world {
			return large
		}
		return 17
	}
	return 1000 + src - dst
}

// Message is one message of a random batch test.
type Message struct {
	Src, Dst, Count int
	DType           transport.DType
}

// Random makes n messages between random ranks (a rank to itself too) of random dtypes
// and counts (0, 1, 7, 1000 or large), from seed, and each rank's ops in a random order
// that keeps the order of each pair's messages (the order they match in): op 2m is
// message m's send, 2m+1 its receive.
func Random(seed uint64, world, n, large int) ([]Message, [][]int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	sizes := []int{0, 1, 7, 1000, large}
	msgs := make([]Message, n)
	for m := range msgs {
		msgs[m] = Message{Src: rng.IntN(world), Dst: rng.IntN(world), Count: sizes[rng.IntN(len(sizes))], DType: DTypes[rng.IntN(len(DTypes))]}
	}
	order := make([][]int, world)
	for r := range world {
		// Op 2m is message m's send, 2m+1 its receive; deal each rank's ops out in a
		// random interleaving of its lanes.
		lanes := map[[2]int][]int{}
		var keys [][2]int
		for m, x := range msgs {
			for dir, peer := range [2]int{x.Dst, x.Src} {
				if (dir == 0 && x.Src != r) || (dir == 1 && x.Dst != r) {
					continue
				}
				k := [2]int{peer, dir}
				if peer == r {
					k = [2]int{peer, 2 + dir} // a send to itself and its receive pair by position
				}
				if _, ok := lanes[k]; !ok {
					keys = append(keys, k)
				}
				lanes[k] = append(lanes[k], 2*m+dir)
			}
		}
		for len(keys) > 0 {
			i := rng.IntN(len(keys))
			k := keys[i]
			order[r] = append(order[r], lanes[k][0])
			if lanes[k] = lanes[k][1:]; len(lanes[k]) == 0 {
				keys = append(keys[:i], keys[i+1:]...)
			}
		}
	}
	return msgs, order
}

// Blocks is one rank's side of an AllToAllV whose rank src sends count(src, dst)
// elements of esz bytes to rank dst, with the data of call tag: the packed send buffer,
// the counts, and the size of the packed receive buffer.
func Blocks(rank, world, esz, tag int, count func(src, dst int) int) (send []byte, sendCounts, recvCounts []int, recvBytes int) {
	sendCounts, recvCounts = make([]int, world), make([]int, world)
	for p := range world {
		sendCounts[p], recvCounts[p] = count(rank, p), count(p, rank)
		send = append(send, Bytes(sendCounts[p]*esz, rank, p, tag)...)
		recvBytes += recvCounts[p] * esz
	}
	return send, sendCounts, recvCounts, recvBytes
}

// CheckBlocks checks rank's packed receive buffer of an AllToAllV made by Blocks.
func CheckBlocks(recv []byte, rank, esz, tag int, recvCounts []int) error {
	off := 0
	for p, c := range recvCounts {
		if err := Check(recv[off:off+c*esz], p, rank, tag); err != nil {
			return err
		}
		off += c * esz
	}
	return nil
}

// Op is one op of a batch made by Ops: a send of Buf, or a receive into it.
type Op struct {
	Recv        bool
	Peer, Count int
	DType       transport.DType
	Buf         []byte
}

// Ops is rank's ops for the messages and order of Random, sends filled with the data of
// message tag+m, and Verify checks its receive buffers once the batch ran.
func Ops(msgs []Message, order []int, rank, tag int) (ops []Op, verify func() error) {
	recvs := map[int][]byte{}
	for _, o := range order {
		m, x := o/2, msgs[o/2]
		n := x.Count * x.DType.Size()
		if o%2 == 0 {
			ops = append(ops, Op{Peer: x.Dst, Count: x.Count, DType: x.DType, Buf: Bytes(n, x.Src, x.Dst, tag+m)})
			continue
		}
		recvs[m] = make([]byte, n)
		ops = append(ops, Op{Recv: true, Peer: x.Src, Count: x.Count, DType: x.DType, Buf: recvs[m]})
	}
	return ops, func() error {
		for m, b := range recvs {
			if err := Check(b, msgs[m].Src, rank, tag+m); err != nil {
				return err
			}
		}
		return nil
	}
}
