package rendezvous

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/goccl/goccl/transport"
)

// The TCPStore wire protocol. After the greeting (below) a client sends requests and
// reads one response each, strictly in turn:
//
//	request:  version u8 | op u8 | keyLen u16 | valLen u32 | key | value
//	response: version u8 | status u8 | 0 u16 | len u32 | payload
//
// all little endian. Keys are at most MaxKey bytes and values MaxValue, checked before
// anything is allocated, so a hostile client costs at most one bounded buffer. Get's
// value is the wait limit in milliseconds (u64, 0 = none); Add's is the delta (i64).
const (
	protoVersion = 1
	// MaxKey bounds a key's length in bytes.
	MaxKey = 4 << 10
	// MaxValue bounds a value's length in bytes.
	MaxValue   = 64 << 20
	reqHeader  = 8
	respHeader = 8
	maxMessage = 1 << 10 // error text in a response
)

// Operations.
const (
	opSet    = 1
	opGet    = 2
	opAdd    = 3
	opDelete = 4
)

// Response statuses.
const (
	stOK       = 0
	stTimeout  = 1 // Get's wait limit passed
	stInvalid  = 2 // e.g. Add on a value that is not an integer
	stProtocol = 3 // malformed request; the server closes the connection
	stClosed   = 4 // the server is shutting down
)

type request struct {
	op    byte
	key   string
	value []byte
}

func (r *request) encode() []byte {
	b := make([]byte, reqHeader, reqHeader+len(r.key)+len(r.value))
	b[0], b[1] = protoVersion, r.op
	binary.LittleEndian.PutUint16(b[2:], uint16(len(r.key)))
	binary.LittleEndian.PutUint32(b[4:], uint32(len(r.value)))
	b = append(b, r.key...)
	return append(b, r.value...)
}

// readRequest decodes one request, rejecting an unknown version or op and oversized,
// truncated or ill-formed fields before allocating for them.
func readRequest(rd io.Reader) (request, error) {
	var h [reqHeader]byte
	if _, err := io.ReadFull(rd, h[:]); err != nil {
		return request{}, err
	}
	if h[0] != protoVersion {
		return request{}, fmt.Errorf("%w: store protocol version %d, this server speaks %d", transport.ErrProtocol, h[0], protoVersion)
	}
	op := h[1]
	if op < opSet || op > opDelete {
		return request{}, fmt.Errorf("%w: unknown store operation %d", transport.ErrProtocol, op)
	}
	kl, vl := int(binary.LittleEndian.Uint16(h[2:])), int64(binary.LittleEndian.Uint32(h[4:]))
	if kl == 0 || kl > MaxKey {
		return request{}, fmt.Errorf("%w: key of %d bytes (want 1..%d)", transport.ErrProtocol, kl, MaxKey)
	}
	if vl > MaxValue {
		return request{}, fmt.Errorf("%w: value of %d bytes exceeds %d", transport.ErrProtocol, vl, MaxValue)
	}
	if want := fixedValue(op); want >= 0 && vl != want {
		return request{}, fmt.Errorf("%w: operation %d carries %d value bytes, want %d", transport.ErrProtocol, op, vl, want)
	}
	buf := make([]byte, int64(kl)+vl)
	if _, err := io.ReadFull(rd, buf); err != nil {
		return request{}, unexpected(err)
	}
	return request{op: op, key: string(buf[:kl]), value: buf[kl:]}, nil
}

// fixedValue is the value length op requires, or -1 when any length is allowed.
func fixedValue(op byte) int64 {
	switch op {
	case opGet, opAdd:
		return 8
	case opDelete:
		return 0
	}
	return -1
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func encodeResponse(status byte, payload []byte) []byte {
	b := make([]byte, respHeader, respHeader+len(payload))
	b[0], b[1] = protoVersion, status
	binary.LittleEndian.PutUint32(b[4:], uint32(len(payload)))
	return append(b, payload...)
}

// readResponse decodes one response; limit bounds its payload.
func readResponse(rd io.Reader, limit int) (byte, []byte, error) {
	var h [respHeader]byte
	if _, err := io.ReadFull(rd, h[:]); err != nil {
		return 0, nil, err
	}
	if h[0] != protoVersion || h[1] > stClosed || h[2] != 0 || h[3] != 0 {
		return 0, nil, fmt.Errorf("%w: malformed store response header %x", transport.ErrProtocol, h)
	}
	n := int64(binary.LittleEndian.Uint32(h[4:]))
	if h[1] != stOK {
		limit = maxMessage
	}
	if n > int64(limit) {
		return 0, nil, fmt.Errorf("%w: store response of %d bytes exceeds %d", transport.ErrProtocol, n, limit)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(rd, p); err != nil {
		return 0, nil, unexpected(err)
	}
	return h[1], p, nil
}

// The greeting. The server speaks first:
//
//	server: magic u32 | version u8 | flags u8 | nonceS [32]
//	client: magic u32 | version u8 | flags u8 | nonceC [32] | HMAC(token, "client", nonceS, nonceC)
//	server: status u8 | HMAC(token, "server", nonceC, nonceS) | msgLen u16 | msg
//
// Without a token the nonces and MACs are zeros and unchecked. Fresh nonces on both
// sides make a recorded greeting useless later; the token never crosses the wire.
const (
	storeMagic   = 0x54534347 // "GCST" little endian
	nonceLen     = 32
	macLen       = sha256.Size
	greetLen     = 6 + nonceLen
	greetReply   = 6 + nonceLen + macLen
	flagAuth     = 1
	greetOK      = 0
	greetRefused = 1
)

func greeting(flags byte, nonce []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, storeMagic)
	b = append(b, protoVersion, flags)
	return append(b, nonce...)
}

// parseGreeting checks the fixed part of a greeting (magic, version, flags).
func parseGreeting(b []byte) (flags byte, nonce []byte, err error) {
	if m := binary.LittleEndian.Uint32(b); m != storeMagic {
		return 0, nil, fmt.Errorf("%w: bad magic %#08x: not a goccl store", transport.ErrProtocol, m)
	}
	if b[4] != protoVersion {
		return 0, nil, fmt.Errorf("%w: store protocol version %d, this build speaks %d", transport.ErrProtocol, b[4], protoVersion)
	}
	if b[5]&^flagAuth != 0 {
		return 0, nil, fmt.Errorf("%w: unknown greeting flags %#x", transport.ErrProtocol, b[5])
	}
	return b[5], b[6 : 6+nonceLen], nil
}

func storeMAC(token []byte, label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("goccl-store/" + label))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func freshNonce() []byte {
	b := make([]byte, nonceLen)
	_, _ = rand.Read(b) // never fails on Linux (Go 1.24+ would crash rather than return)
	return b
}
