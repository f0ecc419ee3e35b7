package goccl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/goccl/goccl/transport"
)

// What happens when an operation fails on one rank:
//  1. The error is explained: a control frame from a peer becomes "rank X failed this
//     operation because of rank Y"; a link error names the peer and its host.
//  2. The ranks agree on a root cause through the store: the first rank to report a
//     failure on this communicator records which rank it implicates; later reporters
//     (whose own symptom may only be a link to a survivor that already left, possibly
//     in a later operation: one-way collectives let upstream ranks run ahead) adopt it.
//  3. The rank sends a control frame to every peer, so ranks blocked on it fail at once
//     instead of waiting for the timeout, and they repeat steps 1-3.

// Abort codes carried in the low byte of a control frame's Count; the implicated rank
// (plus one, 0 = none) is carried in the bits above.
const (
	abortTag          = 0xffffffff
	abortInvalid      = 1
	abortMismatch     = 2
	abortPeer         = 3
	abortTimeout      = 4
	abortClosed       = 5
	abortOther        = 6
	abortNotSupported = 7
	abortAuth         = 8
	abortCancelled    = 9 // the rank's caller cancelled the operation's context
)

var abortNames = map[uint64]string{abortInvalid: "invalid argument", abortMismatch: "collective mismatch",
	abortPeer: "peer failure", abortTimeout: "timeout", abortClosed: "closed", abortOther: "error",
	abortNotSupported: "not supported", abortAuth: "authentication failed", abortCancelled: "cancelled by its caller"}

var abortErrs = map[uint64]error{abortInvalid: transport.ErrInvalid, abortMismatch: transport.ErrMismatch,
	abortPeer: transport.ErrPeer, abortTimeout: transport.ErrTimeout, abortClosed: transport.ErrPeer,
	abortOther: transport.ErrPeer, abortNotSupported: transport.ErrNotSupported, abortAuth: transport.ErrAuth,
	abortCancelled: transport.ErrPeer}

func abortCode(err error) uint64 {
	var ra *remoteAbort
	switch {
	case errors.As(err, &ra):
		return ra.code
	case errors.Is(err, transport.ErrAuth):
		return abortAuth
	case errors.Is(err, transport.ErrInvalid):
		return abortInvalid
	case errors.Is(err, transport.ErrMismatch):
		return abortMismatch
	case errors.Is(err, transport.ErrPeer):
		return abortPeer
	case errors.Is(err, transport.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return abortTimeout
	case errors.Is(err, transport.ErrClosed):
		return abortClosed
	case errors.Is(err, transport.ErrNotSupported):
		return abortNotSupported
	case errors.Is(err, context.Canceled):
		return abortCancelled
	}
	return abortOther
}

// remoteAbort is the error of a rank whose peer failed the operation first.
type remoteAbort struct {
	rank      int // this rank
	origin    int // the rank that detected the failure first
	implicate int // the rank the failure is about (dead, disagreeing), -1 if none
	code      uint64
	hdr       transport.Header
	c         *Comm
}

func (e *remoteAbort) Error() string {
	return fmt.Sprintf("goccl: rank %d: %s failed: %s", e.rank, opLabel(e.hdr), e.c.cause(e.code, e.implicate, e.origin))
}

// opLabel names a failed operation in an error: a collective with its number, a
// SendRecv (whose messages are numbered per peer, not with the collectives) by its kind.
func opLabel(hdr transport.Header) string {
	if pointToPoint(hdr.Fp.Kind) {
		return hdr.Fp.Kind.String()
	}
	return fmt.Sprintf("%s op #%d", hdr.Fp.Kind, hdr.Seq)
}

// pointToPoint reports whether kind's messages travel on the sequences of each pair of
// ranks (SendRecv, BatchSendRecv, AllToAllV) rather than under a collective's number.
func pointToPoint(kind Kind) bool {
	return kind == transport.KindSendRecv || kind == transport.KindAllToAllV
}

func (e *remoteAbort) Unwrap() error { return abortErrs[e.code] }

// cause describes a failure for people: what happened, to which rank, who saw it.
func (c *Comm) cause(code uint64, implicate, origin int) string {
	what := abortNames[code]
	switch {
	case implicate >= 0 && implicate != origin:
		return fmt.Sprintf("%s involving rank %d (host %s), reported by rank %d", what, implicate, c.PeerHost(implicate), origin)
	case implicate >= 0:
		return fmt.Sprintf("%s on rank %d (host %s); see its error", what, implicate, c.PeerHost(implicate))
	}
	return fmt.Sprintf("rank %d (host %s) failed it (%s); see its error", origin, c.PeerHost(origin), what)
}

// implicated returns the rank an error is about: the peer of a link error or mismatch,
// the implicated rank of a remote abort, this rank for a local error (-1 if unknown).
func (c *Comm) implicated(err error) int {
	var ra *remoteAbort
	var pe *transport.PeerError
	var mm *transport.MismatchError
	var de *desyncError
	switch {
	case errors.As(err, &ra):
		return ra.implicate
	case errors.As(err, &de):
		return de.peer
	case errors.As(err, &mm):
		return mm.Peer
	case errors.As(err, &pe):
		return pe.Peer
	case errors.Is(err, transport.ErrInvalid), errors.Is(err, transport.ErrNotSupported):
		return c.rank
	}
	return -1
}

// failOp runs the three steps above and returns the error for the caller.
func (c *Comm) failOp(ctx context.Context, hdr transport.Header, err error) error {
	err = c.explain(err, hdr)
	if de, ok := desyncCause(ctx); ok {
		// The watchdog cancelled it: say why first, so errors.Is finds ErrMismatch.
		err = fmt.Errorf("goccl: rank %d: %s op #%d: %w (it was then cancelled: %v)", c.rank, hdr.Fp.Kind, hdr.Seq, de, err)
	} else if ra, ok := failedCause(ctx); ok && !errors.As(err, new(*remoteAbort)) {
		// The watchdog found another rank's failure in the store while this one was
		// blocked where that rank's abort frame could not reach it.
		err = fmt.Errorf("%w (found in the store while this rank was blocked; it then saw: %v)", ra, err)
	}
	code, who := abortCode(err), c.implicated(err)
	origin := c.rank
	var ra *remoteAbort
	if errors.As(err, &ra) {
		origin = ra.origin
	}
	if rc, rwho, rorigin, ok := c.agreeCause(code, who, origin); ok && (rwho != who || rorigin != origin) {
		err = fmt.Errorf("goccl: rank %d: %s failed: root cause: %s (this rank then saw: %w)",
			c.rank, opLabel(hdr), c.cause(rc, rwho, rorigin), err)
		code, who, origin = rc, rwho, rorigin
	}
	if errors.Is(err, transport.ErrTimeout) && !pointToPoint(hdr.Fp.Kind) { // collectives' progress
		if b := c.behind(hdr.Seq); len(b) > 0 {
			err = fmt.Errorf("%w; ranks that never reached it: %s", err, strings.Join(b, "; "))
		}
	}
	c.abortPeers(hdr, code, who, origin)
	return err
}

// agreeCause records this rank's view of the failure if it is the communicator's first,
// or returns the first view recorded (a communicator fails only once), unless that view
// blames this rank and this rank's own names another (see below). It is bounded to a fraction of a second: when the
// store is unreachable (its host died) each rank keeps its own view.
func (c *Comm) agreeCause(code uint64, who, origin int) (uint64, int, int, bool) {
	if c.size == 1 {
		return 0, 0, 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	key := "fail"
	n, err := c.store.Add(ctx, key+"/n", 1)
	if err != nil {
		return 0, 0, 0, false
	}
	if n == 1 {
		c.store.Set(ctx, key+"/who", []byte(fmt.Sprintf("%d %d %d", code, who, origin)))
		return 0, 0, 0, false
	}
	b, err := c.store.Get(ctx, key+"/who")
	if err != nil {
		return 0, 0, 0, false
	}
	var rc uint64
	var rw, ro int
	if _, err := fmt.Sscanf(string(b), "%d %d %d", &rc, &rw, &ro); err != nil || abortNames[rc] == "" {
		return 0, 0, 0, false
	}
	if rw == c.rank && ro != c.rank && who >= 0 && who != c.rank {
		// The first record blames this rank, which is alive and failed because of
		// another: a peer lost its link to this rank when this rank's own failure tore
		// down a send to it half-way (a tree node's send to one child, cut when the
		// other child died), and reached the store first. This rank's view is nearer the
		// cause; it replaces the record for the ranks that read it later, and this rank
		// keeps its own error.
		c.store.Set(ctx, key+"/who", []byte(fmt.Sprintf("%d %d %d", code, who, origin)))
		return 0, 0, 0, false
	}
	return rc, rw, ro, true
}

// abortPeers tells every peer that this rank failed operation hdr.
func (c *Comm) abortPeers(hdr transport.Header, code uint64, who, origin int) {
	h := transport.Header{Seq: hdr.Seq, Tag: abortTag, Fp: transport.Fingerprint{Kind: transport.KindControl,
		Count: code | uint64(who+1)<<8, Root: int32(origin)}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range c.links {
		if l == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Send(ctx, h, nil)
		}()
	}
	wg.Wait()
}

// explain turns "a peer sent a control frame" into the failure that peer reported.
func (c *Comm) explain(err error, hdr transport.Header) error {
	var mm *transport.MismatchError
	if errors.As(err, &mm) && mm.Got.Fp.Kind == transport.KindControl && mm.Got.Tag == abortTag {
		code := mm.Got.Fp.Count & 0xff
		who := int(mm.Got.Fp.Count>>8) - 1
		if abortNames[code] == "" || who >= c.size {
			code, who = abortOther, -1
		}
		return &remoteAbort{rank: c.rank, origin: int(mm.Got.Fp.Root), implicate: who, code: code, hdr: hdr, c: c}
	}
	return err
}
