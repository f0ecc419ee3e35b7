//go:build linux

package shm

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/goccl/goccl/transport"
)

// With an auth token, a segment carries a challenge-response in its header, so that
// neither side links with a process that does not hold the token (a stranger of the same
// user can map a /dev/shm file, but cannot make or answer the proofs). The creator draws
// a fresh nonce and proves it holds the token over (communicator, ranks, nonce); the
// opener checks that before it attaches and answers with its own proof over the same
// nonce and its pid, which the creator checks before it accepts the attach. A replayed
// proof fails because every segment has a new nonce.
const (
	hAuthNonce  = 1280 // 16 bytes, written by the creator
	hAuthCreate = 1296 // 32 bytes: HMAC of the creator
	hAuthOpen   = 1344 // 32 bytes: HMAC of the opener
	authNonceN  = 16
)

func authMAC(token []byte, role, commID string, lo, hi int, nonce []byte, pid int) []byte {
	m := hmac.New(sha256.New, token)
	var b [16]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(lo))
	binary.LittleEndian.PutUint32(b[4:], uint32(hi))
	binary.LittleEndian.PutUint64(b[8:], uint64(pid))
	m.Write([]byte("goccl-shm-" + role + "\x00" + commID + "\x00"))
	m.Write(b[:])
	m.Write(nonce)
	return m.Sum(nil)
}

// sealCreator writes the creator's nonce and proof (no-op without a token).
func (s *segment) sealCreator(token []byte, commID string, lo, hi int) error {
	if len(token) == 0 {
		return nil
	}
	nonce := s.mem[hAuthNonce : hAuthNonce+authNonceN]
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("shm: auth nonce: %w", err)
	}
	copy(s.mem[hAuthCreate:hAuthCreate+sha256.Size], authMAC(token, "create", commID, lo, hi, nonce, 0))
	return nil
}

// checkCreator verifies the creator's proof and writes the opener's answer.
func (s *segment) checkCreator(token []byte, commID string, lo, hi, openerPid int) error {
	if len(token) == 0 {
		return nil
	}
	nonce := s.mem[hAuthNonce : hAuthNonce+authNonceN]
	if !hmac.Equal(s.mem[hAuthCreate:hAuthCreate+sha256.Size], authMAC(token, "create", commID, lo, hi, nonce, 0)) {
		return fmt.Errorf("shm: rank %d: %w: the creator of segment %s (rank %d) did not prove it holds the auth token",
			hi, transport.ErrAuth, s.path, lo)
	}
	copy(s.mem[hAuthOpen:hAuthOpen+sha256.Size], authMAC(token, "open", commID, lo, hi, nonce, openerPid))
	return nil
}

// checkOpener verifies the opener's answer (on the creator, before it accepts the attach).
func (s *segment) checkOpener(token []byte, commID string, lo, hi, openerPid int) error {
	if len(token) == 0 {
		return nil
	}
	nonce := s.mem[hAuthNonce : hAuthNonce+authNonceN]
	if !hmac.Equal(s.mem[hAuthOpen:hAuthOpen+sha256.Size], authMAC(token, "open", commID, lo, hi, nonce, openerPid)) {
		return fmt.Errorf("shm: rank %d: %w: the process that attached segment %s (pid %d) did not prove it holds the auth token",
			lo, transport.ErrAuth, s.path, openerPid)
	}
	return nil
}

// authenticated makes the creator of a segment wait, with a token, until the opener has
// attached and its proof checked, so no data from an unproven peer is ever read.
func (c *conn) authenticated(ctx context.Context) error {
	for len(c.token) > 0 && !c.attached.Load() {
		if err := c.check(ctx); err != nil {
			return err
		}
		if !c.attached.Load() {
			time.Sleep(20 * time.Microsecond)
		}
	}
	return nil
}
