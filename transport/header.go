package transport

import (
	"encoding/binary"
	"fmt"
)

// Kind names a collective (or point-to-point) operation.
type Kind uint8

// The operation kinds carried in every message header.
const (
	KindNone Kind = iota
	KindAllReduce
	KindReduce
	KindBroadcast
	KindAllGather
	KindReduceScatter
	KindGather
	KindScatter
	KindAllToAll
	KindBarrier
	KindSendRecv
	KindControl // communicator-internal traffic (init, split, heartbeats)
	// KindAllToAllV marks the messages of an all-to-all with a count per peer: they travel
	// as point-to-point messages, so that it never matches a peer's SendRecv or AllToAll.
	// It has no algorithm of its own, so it is not in Kinds.
	KindAllToAllV
	kindCount
)

var kindNames = [...]string{"none", "allreduce", "reduce", "broadcast", "allgather", "reducescatter",
	"gather", "scatter", "alltoall", "barrier", "sendrecv", "control", "alltoallv"}

// Kinds lists the user-visible collective kinds: those an algorithm spec can name.
var Kinds = []Kind{KindAllReduce, KindReduce, KindBroadcast, KindAllGather, KindReduceScatter,
	KindGather, KindScatter, KindAllToAll, KindBarrier, KindSendRecv}

// Valid reports whether k is a defined kind.
func (k Kind) Valid() bool { return k < kindCount }

func (k Kind) String() string {
	if !k.Valid() {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return kindNames[k]
}

// ParseKind accepts the names String returns for the kinds in Kinds, with or without
// underscores ("all_reduce", "allreduce").
func ParseKind(s string) (Kind, error) {
	n := normalizeName(s)
	for _, k := range Kinds {
		if n == kindNames[k] {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown collective %q (valid: allreduce, reduce, broadcast, allgather, "+
		"reducescatter, gather, scatter, alltoall, barrier, sendrecv)", ErrInvalid, s)
}

func normalizeName(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || c == '-' || c == ' ':
			continue
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

// Fingerprint identifies a collective call: every rank in the same sequence position must
// produce the same one, or the call is a mismatch.
type Fingerprint struct {
	Kind  Kind
	DType DType
	Op    Op
	Count uint64 // elements, in NCCL's counting (per rank for AllGather and ReduceScatter)
	Root  int32  // -1 for rootless collectives
}

func (f Fingerprint) String() string {
	s := fmt.Sprintf("%s %s", f.Kind, f.DType)
	if f.Kind == KindAllReduce || f.Kind == KindReduce || f.Kind == KindReduceScatter {
		s += " " + f.Op.String()
	}
	s += fmt.Sprintf(" count=%d", f.Count)
	if f.Root >= 0 {
		s += fmt.Sprintf(" root=%d", f.Root)
	}
	return s
}

// Header travels in front of every message on every link.
type Header struct {
	Seq uint64      // the communicator's operation sequence number
	Fp  Fingerprint // what operation this message belongs to
	Tag uint32      // the algorithm's step/chunk tag inside the operation
}

func (h Header) String() string {
	return fmt.Sprintf("op #%d (%s, tag %d)", h.Seq, h.Fp, h.Tag)
}

// Wire format of a frame header: fixed size, little endian.
const (
	FrameMagic   = 0x6363 // "cc"
	FrameVersion = 1
	// FrameHeaderSize is the encoded size of a frame header.
	FrameHeaderSize = 40
	// MaxFrameLen bounds a single frame's payload (a collective splits larger messages).
	MaxFrameLen = 1 << 40
)

// Frame is a header plus the payload length, as encoded on byte-stream links.
type Frame struct {
	Header
	Len uint64
}

// Encode writes f into b (len(b) >= FrameHeaderSize).
func (f *Frame) Encode(b []byte) {
	_ = b[FrameHeaderSize-1]
	binary.LittleEndian.PutUint16(b[0:], FrameMagic)
	b[2] = FrameVersion
	b[3] = byte(f.Fp.Kind)
	b[4] = byte(f.Fp.DType)
	b[5] = byte(f.Fp.Op)
	b[6], b[7] = 0, 0
	binary.LittleEndian.PutUint64(b[8:], f.Seq)
	binary.LittleEndian.PutUint64(b[16:], f.Fp.Count)
	binary.LittleEndian.PutUint32(b[24:], uint32(f.Fp.Root))
	binary.LittleEndian.PutUint32(b[28:], f.Tag)
	binary.LittleEndian.PutUint64(b[32:], f.Len)
}

// Decode parses a frame header, rejecting a bad magic, version, kind, dtype, op or length.
func (f *Frame) Decode(b []byte) error {
	if len(b) < FrameHeaderSize {
		return fmt.Errorf("%w: frame header is %d bytes, want %d", ErrProtocol, len(b), FrameHeaderSize)
	}
	if m := binary.LittleEndian.Uint16(b[0:]); m != FrameMagic {
		return fmt.Errorf("%w: bad frame magic %#04x (want %#04x)", ErrProtocol, m, FrameMagic)
	}
	if b[2] != FrameVersion {
		return fmt.Errorf("%w: frame version %d, this build speaks %d", ErrProtocol, b[2], FrameVersion)
	}
	f.Fp.Kind, f.Fp.DType, f.Fp.Op = Kind(b[3]), DType(b[4]), Op(b[5])
	if !f.Fp.Kind.Valid() || !f.Fp.DType.Valid() || !f.Fp.Op.Valid() {
		return fmt.Errorf("%w: frame has kind %d dtype %d op %d out of range", ErrProtocol, b[3], b[4], b[5])
	}
	if b[6] != 0 || b[7] != 0 {
		return fmt.Errorf("%w: frame reserved bytes are not zero", ErrProtocol)
	}
	f.Seq = binary.LittleEndian.Uint64(b[8:])
	f.Fp.Count = binary.LittleEndian.Uint64(b[16:])
	f.Fp.Root = int32(binary.LittleEndian.Uint32(b[24:]))
	f.Tag = binary.LittleEndian.Uint32(b[28:])
	f.Len = binary.LittleEndian.Uint64(b[32:])
	if f.Len > MaxFrameLen {
		return fmt.Errorf("%w: frame length %d exceeds the limit %d", ErrProtocol, f.Len, uint64(MaxFrameLen))
	}
	return nil
}

// Check compares an arrived frame with what the receiver expected and returns a
// *MismatchError when they differ.
func (f *Frame) Check(rank, peer int, want Header, wantLen int) error {
	if f.Header != want || f.Len != uint64(wantLen) {
		return &MismatchError{Rank: rank, Peer: peer, Want: want, Got: f.Header, WantLen: wantLen, GotLen: int(f.Len)}
	}
	return nil
}
