package tcp

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

// The handshake runs on every socket before any data. The dialer (the lower rank)
// speaks first:
//
//	dialer -> listener: init      {magic, version, flags, nonceD if auth}
//	listener -> dialer: challenge {nonceL, HMAC(token, "listener", nonceD, nonceL)}  (auth only)
//	dialer -> listener: hello     {HMAC(token, "dialer", nonceL, nonceD, fields) if auth, fields}
//	listener -> dialer: accept {rank} | reject {code, reason}
//
// Each side proves it holds the token over the other side's fresh nonce, so a recorded
// handshake replayed later fails, and the two MACs use different labels so one cannot be
// reflected as the other. The token itself never crosses the wire or reaches a log.
// Every message is {type u8, len u16 LE, body}, with len bounded by maxBody, so a
// stranger cannot make a rank allocate more than a few hundred bytes.
const (
	hsMagic   = 0x50544347 // "GCTP" little endian
	hsVersion = 2          // 2: parts of a striped message are cut on 64-byte boundaries
	maxBody   = 1024
	maxCommID = 512
	nonceLen  = 32
	macLen    = sha256.Size
	flagAuth  = 1
)

// Message types.
const (
	msgInit      = 1
	msgChallenge = 2
	msgHello     = 3
	msgAccept    = 4
	msgReject    = 5
)

// Reject codes, mapped to sentinels on the dialer's side.
const (
	rejectProtocol = 1 // malformed or incompatible handshake
	rejectAuth     = 2 // missing or wrong token
	rejectPeer     = 3 // wrong communicator, world or rank
	rejectBusy     = 4 // that socket of that rank is already linked
)

func rejectSentinel(code byte) error {
	switch code {
	case rejectAuth:
		return transport.ErrAuth
	case rejectPeer:
		return transport.ErrInvalid
	}
	return transport.ErrProtocol
}

// hello is what the dialer says about itself and the link it wants.
type hello struct {
	Comm      string
	From, To  uint32
	World     uint32
	Index     uint16 // this socket's index in the link
	Count     uint16 // sockets in the link
	StripeMin uint32 // the dialer's stripe threshold; the listener adopts it for the link
}

func (h *hello) encode() []byte {
	b := make([]byte, 0, 2+len(h.Comm)+20)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h.Comm)))
	b = append(b, h.Comm...)
	b = binary.LittleEndian.AppendUint32(b, h.From)
	b = binary.LittleEndian.AppendUint32(b, h.To)
	b = binary.LittleEndian.AppendUint32(b, h.World)
	b = binary.LittleEndian.AppendUint16(b, h.Index)
	b = binary.LittleEndian.AppendUint16(b, h.Count)
	b = binary.LittleEndian.AppendUint32(b, h.StripeMin)
	return b
}

// decodeHello parses hello fields; it checks the structure, not the values.
func decodeHello(b []byte) (hello, error) {
	var h hello
	if len(b) < 2 {
		return h, fmt.Errorf("%w: hello is %d bytes", transport.ErrProtocol, len(b))
	}
	n := int(binary.LittleEndian.Uint16(b))
	if n > maxCommID {
		return h, fmt.Errorf("%w: hello communicator id is %d bytes, limit %d", transport.ErrProtocol, n, maxCommID)
	}
	if len(b) != 2+n+20 {
		return h, fmt.Errorf("%w: hello is %d bytes, want %d for a %d-byte communicator id", transport.ErrProtocol, len(b), 2+n+20, n)
	}
	h.Comm = string(b[2 : 2+n])
	b = b[2+n:]
	h.From = binary.LittleEndian.Uint32(b[0:])
	h.To = binary.LittleEndian.Uint32(b[4:])
	h.World = binary.LittleEndian.Uint32(b[8:])
	h.Index = binary.LittleEndian.Uint16(b[12:])
	h.Count = binary.LittleEndian.Uint16(b[14:])
	h.StripeMin = binary.LittleEndian.Uint32(b[16:])
	return h, nil
}

// initMsg opens a handshake.
type initMsg struct {
	Version uint16
	Flags   uint8
	Nonce   []byte // nonceLen bytes when Flags&flagAuth
}

func (m *initMsg) encode() []byte {
	b := binary.LittleEndian.AppendUint32(nil, hsMagic)
	b = binary.LittleEndian.AppendUint16(b, m.Version)
	b = append(b, m.Flags)
	return append(b, m.Nonce...)
}

func decodeInit(b []byte) (initMsg, error) {
	var m initMsg
	if len(b) < 7 {
		return m, fmt.Errorf("%w: init is %d bytes", transport.ErrProtocol, len(b))
	}
	if g := binary.LittleEndian.Uint32(b); g != hsMagic {
		return m, fmt.Errorf("%w: bad magic %#08x: not a goccl tcp link", transport.ErrProtocol, g)
	}
	m.Version, m.Flags = binary.LittleEndian.Uint16(b[4:]), b[6]
	if m.Version != hsVersion {
		// Checked before the length: a future version may lay the rest out differently.
		return m, fmt.Errorf("%w: peer speaks tcp handshake version %d, this rank speaks %d", transport.ErrProtocol, m.Version, hsVersion)
	}
	if m.Flags&^flagAuth != 0 {
		return m, fmt.Errorf("%w: unknown handshake flags %#x", transport.ErrProtocol, m.Flags)
	}
	want := 7
	if m.Flags&flagAuth != 0 {
		want += nonceLen
	}
	if len(b) != want {
		return m, fmt.Errorf("%w: init is %d bytes, want %d", transport.ErrProtocol, len(b), want)
	}
	m.Nonce = b[7:]
	return m, nil
}

func encodeReject(code byte, reason string) []byte {
	if len(reason) > maxBody-1 {
		reason = reason[:maxBody-1]
	}
	return append([]byte{code}, reason...)
}

func decodeReject(b []byte) (byte, string, error) {
	if len(b) < 1 {
		return 0, "", fmt.Errorf("%w: empty reject", transport.ErrProtocol)
	}
	reason := make([]byte, 0, len(b)-1)
	for _, c := range b[1:] { // the reason reaches logs: keep it printable
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		reason = append(reason, c)
	}
	return b[0], string(reason), nil
}

// writeMsg writes one handshake message.
func writeMsg(w io.Writer, typ byte, body []byte) error {
	if len(body) > maxBody {
		return fmt.Errorf("%w: handshake message of %d bytes", transport.ErrInvalid, len(body))
	}
	b := make([]byte, 3, 3+len(body))
	b[0] = typ
	binary.LittleEndian.PutUint16(b[1:], uint16(len(body)))
	_, err := w.Write(append(b, body...))
	return err
}

// readMsg reads one handshake message, bounded by maxBody.
func readMsg(r io.Reader) (byte, []byte, error) {
	var h [3]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if h[0] < msgInit || h[0] > msgReject {
		return 0, nil, fmt.Errorf("%w: unknown handshake message type %d", transport.ErrProtocol, h[0])
	}
	n := int(binary.LittleEndian.Uint16(h[1:]))
	if n > maxBody {
		return 0, nil, fmt.Errorf("%w: handshake message of %d bytes exceeds %d", transport.ErrProtocol, n, maxBody)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return h[0], body, nil
}

// expect reads a message of type want; a reject becomes an error carrying its reason.
func expect(r io.Reader, want byte) ([]byte, error) {
	typ, body, err := readMsg(r)
	if err != nil {
		return nil, err
	}
	if typ == msgReject && want != msgReject {
		code, reason, err := decodeReject(body)
		if err != nil {
			return nil, err
		}
		return nil, &refusedError{code: code, reason: reason}
	}
	if typ != want {
		return nil, fmt.Errorf("%w: handshake message type %d, want %d", transport.ErrProtocol, typ, want)
	}
	return body, nil
}

// refusedError is the listener's reject as the dialer sees it.
type refusedError struct {
	code   byte
	reason string
}

func (e *refusedError) Error() string { return "refused: " + e.reason }
func (e *refusedError) Unwrap() error { return rejectSentinel(e.code) }

func mac(token []byte, label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("goccl-tcp/" + label))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func nonce() []byte {
	b := make([]byte, nonceLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (Go 1.24+ panics instead)
	return b
}

// dialHandshake runs the dialer's side over rw. It returns the listener's rank.
func dialHandshake(rw io.ReadWriter, token []byte, h hello) (uint32, error) {
	im := initMsg{Version: hsVersion}
	var nd []byte
	if len(token) > 0 {
		nd = nonce()
		im.Flags, im.Nonce = flagAuth, nd
	}
	if err := writeMsg(rw, msgInit, im.encode()); err != nil {
		return 0, err
	}
	fields := h.encode()
	body := fields
	if len(token) > 0 {
		ch, err := expect(rw, msgChallenge)
		if err != nil {
			return 0, err
		}
		if len(ch) != nonceLen+macLen {
			return 0, fmt.Errorf("%w: challenge is %d bytes, want %d", transport.ErrProtocol, len(ch), nonceLen+macLen)
		}
		nl := ch[:nonceLen]
		if !hmac.Equal(ch[nonceLen:], mac(token, "listener", nd, nl)) {
			return 0, fmt.Errorf("%w: the listener did not prove it holds the auth token", transport.ErrAuth)
		}
		body = append(mac(token, "dialer", nl, nd, fields), fields...)
	}
	if err := writeMsg(rw, msgHello, body); err != nil {
		return 0, err
	}
	acc, err := expect(rw, msgAccept)
	if err != nil {
		return 0, err
	}
	if len(acc) != 4 {
		return 0, fmt.Errorf("%w: accept is %d bytes, want 4", transport.ErrProtocol, len(acc))
	}
	return binary.LittleEndian.Uint32(acc), nil
}

// listenHandshake runs the listener's side up to (not including) the accept, which the
// caller sends once it has placed the socket. A failure is a *refusedError (already
// sent to the dialer, when the socket still works) or an I/O error.
func listenHandshake(rw io.ReadWriter, token []byte, validate func(hello) *refusedError) (hello, error) {
	refuse := func(code byte, format string, a ...any) (hello, error) {
		e := &refusedError{code: code, reason: fmt.Sprintf(format, a...)}
		_ = writeMsg(rw, msgReject, encodeReject(code, e.reason))
		return hello{}, e
	}
	body, err := expect(rw, msgInit)
	if err != nil {
		var re *refusedError
		if errors.As(err, &re) || errors.Is(err, transport.ErrProtocol) {
			return refuse(rejectProtocol, "%v", err)
		}
		return hello{}, err
	}
	im, err := decodeInit(body)
	if err != nil {
		return refuse(rejectProtocol, "%v", err)
	}
	auth := im.Flags&flagAuth != 0
	switch {
	case len(token) > 0 && !auth:
		return refuse(rejectAuth, "authentication required: this rank has an auth token and the dialer sent none (set the same GOCCL_AUTH_TOKEN on every rank)")
	case len(token) == 0 && auth:
		return refuse(rejectAuth, "the dialer uses an auth token but this rank has none (set the same GOCCL_AUTH_TOKEN on every rank)")
	}
	var nl []byte
	if auth {
		nl = nonce()
		if err := writeMsg(rw, msgChallenge, append(append([]byte{}, nl...), mac(token, "listener", im.Nonce, nl)...)); err != nil {
			return hello{}, err
		}
	}
	body, err = expect(rw, msgHello)
	if err != nil {
		if errors.Is(err, transport.ErrProtocol) {
			return refuse(rejectProtocol, "%v", err)
		}
		return hello{}, err
	}
	if auth {
		if len(body) < macLen {
			return refuse(rejectAuth, "hello too short to carry a MAC")
		}
		if !hmac.Equal(body[:macLen], mac(token, "dialer", nl, im.Nonce, body[macLen:])) {
			return refuse(rejectAuth, "wrong auth token (or a replayed handshake)")
		}
		body = body[macLen:]
	}
	h, err := decodeHello(body)
	if err != nil {
		return refuse(rejectProtocol, "%v", err)
	}
	if re := validate(h); re != nil {
		return refuse(re.code, "%s", re.reason)
	}
	return h, nil
}
