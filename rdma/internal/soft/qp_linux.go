//go:build linux

package soft

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

// QP segment layout: header, the receive-queue counters on their own cache lines, then
// the ring of posted receive ids. posted is written by the owner, consumed by the one
// remote QP that writes with immediate into it.
const (
	qpState    = 8
	qpPosted   = 64
	qpConsumed = 128
	qpRing     = 192

	stateInit      = 1
	stateRTS       = 3
	stateErr       = 6
	stateDestroyed = 7

	extraLen = 12 // pid u32 | table fd i32 | qp fd i32
)

type remoteMR struct {
	s *seg
}

type qp struct {
	mu        sync.Mutex // serialises PostSend (the emulated send queue is in order)
	dev       *device
	s         *seg
	cq        *cq
	num       uint32
	recvDepth uint64

	// Set by Connect.
	remoteQPN  uint32
	watch      *peerWatch
	rtable     *seg
	rqp        *seg
	rcq        ring
	remotePid  int
	remoteMRs  map[uint32]*remoteMR
	remoteKeys []uint32
}

func (q *qp) Num() uint32 { return q.num }

// Addr carries the pid and the fds a peer opens through /proc in Extra.
func (q *qp) Addr() rc.Addr {
	extra := make([]byte, extraLen)
	binary.LittleEndian.PutUint32(extra[0:], uint32(q.dev.pid))
	binary.LittleEndian.PutUint32(extra[4:], uint32(q.dev.table.fd))
	binary.LittleEndian.PutUint32(extra[8:], uint32(q.s.fd))
	return rc.Addr{QPN: q.num, MTU: 5, Extra: extra}
}

// Connect maps the remote QP, its completion queue and its MR table, the software
// counterpart of INIT→RTR→RTS.
func (q *qp) Connect(remote rc.Addr) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.s.load32(qpState) != stateInit {
		return fmt.Errorf("soft: connect qp %d: %w: qp is not in INIT", q.num, transport.ErrInvalid)
	}
	if len(remote.Extra) != extraLen {
		return fmt.Errorf("soft: connect qp %d: %w: remote address has %d provider bytes, want %d (is the peer using the soft provider?)",
			q.num, transport.ErrProtocol, len(remote.Extra), extraLen)
	}
	pid := int(binary.LittleEndian.Uint32(remote.Extra[0:]))
	tfd := int(int32(binary.LittleEndian.Uint32(remote.Extra[4:])))
	qfd := int(int32(binary.LittleEndian.Uint32(remote.Extra[8:])))
	var err error
	if q.watch, err = watchPeer(pid); err != nil {
		return err
	}
	if q.rtable, err = openSeg(pid, tfd); err != nil {
		return err
	}
	if q.rqp, err = openSeg(pid, qfd); err != nil {
		return err
	}
	if len(q.rtable.mem) < tableHdr || q.rtable.load64(0) != magicTable || len(q.rqp.mem) < qpRing || q.rqp.load64(0) != magicQP {
		return fmt.Errorf("soft: connect qp %d: %w: pid %d's segments are not soft RDMA segments", q.num, transport.ErrProtocol, pid)
	}
	if got := q.rqp.load32(16); got != remote.QPN {
		return fmt.Errorf("soft: connect qp %d: %w: remote qp is %d, address says %d", q.num, transport.ErrProtocol, got, remote.QPN)
	}
	cqs, err := openSeg(pid, int(int32(q.rqp.load32(20))))
	if err != nil {
		return err
	}
	if cqs.load64(0) != magicCQ {
		cqs.close()
		return fmt.Errorf("soft: connect qp %d: %w: pid %d's completion queue is not a soft RDMA segment", q.num, transport.ErrProtocol, pid)
	}
	q.rcq = ring{s: cqs, depth: uint64(cqs.load32(8))}
	q.remotePid, q.remoteQPN = pid, remote.QPN
	q.s.store32(qpState, stateRTS)
	return nil
}

// PostRecv posts n receives with the given id. The peer's writes with immediate consume
// them in order.
func (q *qp) PostRecv(id uint64, n int) error {
	st := q.s.load32(qpState)
	if st == stateDestroyed || st == 0 {
		return fmt.Errorf("soft: post recv on qp %d: %w", q.num, transport.ErrClosed)
	}
	p := q.s.load64(qpPosted)
	if p+uint64(n)-q.s.load64(qpConsumed) > q.recvDepth {
		return fmt.Errorf("soft: post recv on qp %d: %w: %d more receives exceed the queue depth %d",
			q.num, transport.ErrInvalid, n, q.recvDepth)
	}
	for i := 0; i < n; i++ {
		q.s.store64(qpRing+int((p+uint64(i))%q.recvDepth)*8, id)
	}
	q.s.store64(qpPosted, p+uint64(n))
	return nil
}

// PostSend performs each write now, in order, and pushes its completion. As on an RC
// QP, the first failed request moves the QP to the error state and every later one
// completes with "Work Request Flushed Error".
func (q *qp) PostSend(wrs []rc.SendWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.s.load32(qpState)
	if st != stateRTS && st != stateErr {
		return fmt.Errorf("soft: post send on qp %d: %w: qp is not ready to send (state %d)", q.num, transport.ErrInvalid, st)
	}
	for i := range wrs {
		wr := &wrs[i]
		var src []byte
		if wr.Len > 0 {
			lm, ok := wr.Local.(*mr)
			if !ok || lm.dev != q.dev || wr.Offset < 0 || wr.Offset+wr.Len > lm.Len() {
				return fmt.Errorf("soft: post send on qp %d: %w: local range [%d, +%d) is outside the registered region",
					q.num, transport.ErrInvalid, wr.Offset, wr.Len)
			}
			src = lm.mem.s.mem[wr.Offset : wr.Offset+wr.Len]
		}
		status := rc.StatusWRFlushErr
		if q.s.load32(qpState) == stateRTS {
			status = q.execute(wr, src)
			if status != rc.StatusSuccess {
				q.s.store32(qpState, stateErr)
			}
		}
		if wr.Signaled || status != rc.StatusSuccess {
			c := rc.Completion{ID: wr.ID, Status: status, Opcode: rc.WCWrite, QPNum: q.num}
			if err := q.cq.ring.push(c); err != nil {
				return fmt.Errorf("soft: qp %d: %w", q.num, err)
			}
		}
	}
	return nil
}

// execute is the emulated NIC: check the peer, the rkey and the bounds, copy, then
// deliver the immediate.
func (q *qp) execute(wr *rc.SendWR, src []byte) rc.Status {
	if !q.peerAlive() {
		return rc.StatusRetryExcErr
	}
	if wr.Len > 0 {
		dst, ok := q.remoteRange(wr.RKey, wr.RemoteAddr, wr.Len)
		if !ok {
			return rc.StatusRemAccessErr
		}
		copy(dst, src)
	}
	if wr.Op != rc.OpWriteImm {
		return rc.StatusSuccess
	}
	// Consume one posted receive; none posted is an RNR NAK, retried forever (rnr_retry 7)
	// while the peer lives.
	consumed := q.rqp.load64(qpConsumed)
	for backoff := time.Microsecond; q.rqp.load64(qpPosted) == consumed; backoff = min(2*backoff, time.Millisecond) {
		if !q.peerAlive() {
			return rc.StatusRetryExcErr
		}
		time.Sleep(backoff)
	}
	depth := uint64(q.rqp.load32(24))
	id := q.rqp.load64(qpRing + int(consumed%depth)*8)
	q.rqp.store64(qpConsumed, consumed+1)
	c := rc.Completion{ID: id, Opcode: rc.WCRecvImm, Len: uint32(wr.Len), Imm: wr.Imm, QPNum: q.remoteQPN}
	if err := q.rcq.push(c); err != nil {
		return rc.StatusRemOpErr
	}
	return rc.StatusSuccess
}

func (q *qp) peerAlive() bool {
	if st := q.rqp.load32(qpState); st == stateDestroyed || st == stateErr {
		return false
	}
	return q.remotePid == os.Getpid() || !q.watch.exited()
}

// remoteRange maps (once per rkey) and bounds-checks the target of a write.
func (q *qp) remoteRange(rkey uint32, addr uint64, n int) ([]byte, bool) {
	fd, off, ok := lookup(q.rtable, rkey, addr, n, rc.AccessRemoteWrite)
	if !ok {
		return nil, false
	}
	m := q.remoteMRs[rkey]
	if m == nil {
		s, err := openSeg(q.remotePid, fd)
		if err != nil {
			return nil, false
		}
		m = &remoteMR{s: s}
		q.remoteMRs[rkey] = m
	}
	if off+uint64(n) > uint64(len(m.s.mem)) {
		return nil, false
	}
	return m.s.mem[off : off+uint64(n)], true
}

// Close marks the QP destroyed, so the peer's next write fails as it would against a
// destroyed QP, and unmaps everything.
func (q *qp) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.s.mem == nil {
		return nil
	}
	q.s.store32(qpState, stateDestroyed)
	for _, m := range q.remoteMRs {
		m.s.close()
	}
	q.remoteMRs = nil
	q.rcq.s.close()
	q.rqp.close()
	q.rtable.close()
	q.watch.close()
	return q.s.close()
}
