package rdma

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

// Wire constants of the connection protocol.
const (
	infoMagic   = 0x4d445247 // "GRDM"
	infoVersion = 1
	nonceLen    = 16
	ctsSize     = 32 // one CTS FIFO entry: addr u64 | rkey u32 | size u32 | seq u64 | pad
	maxExtra    = 255
)

// Immediate data: the top two bits say what a WRITE WITH IMM carries, the low 24 bits
// the slot (data) or FIFO entry (CTS) it filled.
const (
	immData  = 0
	immCTS   = 1
	immClose = 2
	immSlot  = 1<<24 - 1
)

func makeImm(kind, slot int) uint32 { return uint32(kind)<<30 | uint32(slot)&immSlot }

func splitImm(imm uint32) (kind, slot int) { return int(imm >> 30), int(imm & immSlot) }

// Work request ids: the kind in the top byte, an index below.
const (
	wrData  = 1
	wrCTS   = 2
	wrProbe = 3
	wrClose = 4
	wrRecv  = 5
)

func wrID(kind int, idx uint64) uint64 { return uint64(kind)<<56 | idx&(1<<56-1) }

func wrKind(id uint64) int { return int(id >> 56) }

// cts is one receiver-advertised buffer: NCCL's ncclIbSendFifo reduced to one NIC.
type cts struct {
	addr uint64
	rkey uint32
	size uint32
	seq  uint64 // the advertised chunk's sequence number + 1 (0 = empty entry)
}

func (c cts) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], c.addr)
	binary.LittleEndian.PutUint32(b[8:], c.rkey)
	binary.LittleEndian.PutUint32(b[12:], c.size)
	binary.LittleEndian.PutUint64(b[16:], c.seq)
}

func getCTS(b []byte) cts {
	return cts{addr: binary.LittleEndian.Uint64(b[0:]), rkey: binary.LittleEndian.Uint32(b[8:]),
		size: binary.LittleEndian.Uint32(b[12:]), seq: binary.LittleEndian.Uint64(b[16:])}
}

// connInfo is what one rank publishes in the store for one peer: everything the peer
// needs to connect its QPs and write into this rank's buffers (NCCL's
// ncclIbConnectionMetadata, plus the protocol parameters both sides must agree on).
type connInfo struct {
	Provider   string
	Rank, Peer int
	Credits    int
	Chunk      int
	Nonce      [nonceLen]byte
	FifoAddr   uint64 // this rank's sender FIFO: the peer's receiver writes CTS entries here
	FifoKey    uint32
	RingAddr   uint64 // this rank's landing ring (for the peer's liveness probes)
	RingKey    uint32
	TX, RX     []rc.Addr // this rank's sending and receiving QPs
}

func putAddr(b []byte, a rc.Addr) []byte {
	b = binary.LittleEndian.AppendUint32(b, a.QPN)
	b = binary.LittleEndian.AppendUint32(b, a.PSN)
	b = binary.LittleEndian.AppendUint16(b, a.LID)
	b = append(b, a.MTU)
	b = append(b, a.GID[:]...)
	b = append(b, byte(len(a.Extra)))
	return append(b, a.Extra...)
}

func (ci *connInfo) encode() []byte {
	b := binary.LittleEndian.AppendUint32(nil, infoMagic)
	b = binary.LittleEndian.AppendUint16(b, infoVersion)
	b = append(b, byte(len(ci.Provider)))
	b = append(b, ci.Provider...)
	for _, v := range []int{ci.Rank, ci.Peer, ci.Credits, ci.Chunk, len(ci.TX)} {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	b = append(b, ci.Nonce[:]...)
	b = binary.LittleEndian.AppendUint64(b, ci.FifoAddr)
	b = binary.LittleEndian.AppendUint32(b, ci.FifoKey)
	b = binary.LittleEndian.AppendUint64(b, ci.RingAddr)
	b = binary.LittleEndian.AppendUint32(b, ci.RingKey)
	for i := range ci.TX {
		b = putAddr(b, ci.TX[i])
		b = putAddr(b, ci.RX[i])
	}
	return b
}

// reader consumes a byte slice, remembering the first short read.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return make([]byte, n)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}
func (r *reader) u8() byte    { return r.take(1)[0] }
func (r *reader) u16() uint16 { return binary.LittleEndian.Uint16(r.take(2)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }

func (r *reader) addr() rc.Addr {
	a := rc.Addr{QPN: r.u32(), PSN: r.u32(), LID: r.u16(), MTU: r.u8()}
	copy(a.GID[:], r.take(16))
	if n := int(r.u8()); n > 0 {
		a.Extra = append([]byte(nil), r.take(n)...)
	}
	return a
}

func decodeInfo(b []byte) (*connInfo, error) {
	r := &reader{b: b}
	if m := r.u32(); m != infoMagic || r.bad {
		return nil, fmt.Errorf("rdma: %w: connection info has magic %#x, want %#x", transport.ErrProtocol, m, infoMagic)
	}
	if v := r.u16(); v != infoVersion {
		return nil, fmt.Errorf("rdma: %w: peer speaks connection protocol %d, this build speaks %d", transport.ErrProtocol, v, infoVersion)
	}
	ci := &connInfo{}
	ci.Provider = string(r.take(int(r.u8())))
	ci.Rank, ci.Peer, ci.Credits, ci.Chunk = int(r.u32()), int(r.u32()), int(r.u32()), int(r.u32())
	nq := int(r.u32())
	copy(ci.Nonce[:], r.take(nonceLen))
	ci.FifoAddr, ci.FifoKey = r.u64(), r.u32()
	ci.RingAddr, ci.RingKey = r.u64(), r.u32()
	if r.bad || nq < 1 || nq > maxQPs {
		return nil, fmt.Errorf("rdma: %w: connection info is truncated or has %d QPs (want 1..%d)", transport.ErrProtocol, nq, maxQPs)
	}
	for i := 0; i < nq; i++ {
		ci.TX = append(ci.TX, r.addr())
		ci.RX = append(ci.RX, r.addr())
	}
	if r.bad || len(r.b) != 0 {
		return nil, fmt.Errorf("rdma: %w: connection info is %d bytes, malformed", transport.ErrProtocol, len(b))
	}
	return ci, nil
}

// proof binds the auth token to this communicator, both ranks and the verifier's nonce,
// so a proof cannot be replayed to another rank or another communicator.
func proof(token []byte, commID string, from, to int, nonce [nonceLen]byte) []byte {
	m := hmac.New(sha256.New, token)
	fmt.Fprintf(m, "goccl-rdma/v%d\x00%s\x00%d\x00%d\x00", infoVersion, commID, from, to)
	m.Write(nonce[:])
	return m.Sum(nil)
}
