//go:build linux

package soft

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/rdma/internal/rc"
)

type end struct {
	dev rc.Device
	cq  rc.CQ
	qp  rc.QP
	mem rc.Memory
	mr  rc.MR
}

func newEnd(t *testing.T) *end {
	d, err := Open()
	require.NoError(t, err)
	e := &end{dev: d}
	e.cq, err = d.NewCQ(16)
	require.NoError(t, err)
	e.qp, err = d.NewQP(e.cq, 8, 4)
	require.NoError(t, err)
	e.mem, err = d.Alloc(8192)
	require.NoError(t, err)
	e.mr, err = d.Register(e.mem, rc.AccessLocalWrite|rc.AccessRemoteWrite)
	require.NoError(t, err)
	t.Cleanup(func() { e.qp.Close(); e.cq.Close(); e.mr.Close(); e.mem.Free(); d.Close() })
	return e
}

func poll1(t *testing.T, cq rc.CQ) rc.Completion {
	t.Helper()
	out := make([]rc.Completion, 1)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		n, err := cq.Poll(out)
		require.NoError(t, err)
		if n == 1 {
			return out[0]
		}
		cq.Wait(10 * time.Millisecond)
	}
	t.Fatal("no completion")
	return rc.Completion{}
}

// TestWriteImmAndAccessErrors: a write with immediate lands and completes on both sides
// with verbs' opcodes; a bad rkey completes with "remote access error", after which the
// QP is in error and later requests are flushed, as on an RC QP.
func TestWriteImmAndAccessErrors(t *testing.T) {
	a, b := newEnd(t), newEnd(t)
	require.NoError(t, a.qp.Connect(b.qp.Addr()))
	require.NoError(t, b.qp.Connect(a.qp.Addr()))
	require.NoError(t, b.qp.PostRecv(42, 1))
	copy(a.mem.Bytes()[100:], "hello")
	wr := rc.SendWR{ID: 7, Op: rc.OpWriteImm, Local: a.mr, Offset: 100, Len: 5, RemoteAddr: b.mr.Addr() + 10, RKey: b.mr.RKey(), Imm: 0xdeadbeef, Signaled: true}
	require.NoError(t, a.qp.PostSend([]rc.SendWR{wr}))
	require.Equal(t, rc.Completion{ID: 7, Opcode: rc.WCWrite, QPNum: a.qp.Num()}, poll1(t, a.cq))
	require.Equal(t, rc.Completion{ID: 42, Opcode: rc.WCRecvImm, Len: 5, Imm: 0xdeadbeef, QPNum: b.qp.Num()}, poll1(t, b.cq))
	require.Equal(t, "hello", string(b.mem.Bytes()[10:15]))

	for _, bad := range []rc.SendWR{
		{ID: 8, Op: rc.OpWrite, Local: a.mr, Len: 5, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() + 1},                      // wrong key
		{ID: 8, Op: rc.OpWrite, Local: a.mr, Len: 5, RemoteAddr: b.mr.Addr() + uint64(b.mr.Len()) - 2, RKey: b.mr.RKey()}, // out of bounds
	} {
		c, d := newEnd(t), newEnd(t)
		require.NoError(t, c.qp.Connect(d.qp.Addr()))
		bad.Local, bad.RKey, bad.RemoteAddr = c.mr, d.mr.RKey()+bad.RKey-b.mr.RKey(), d.mr.Addr()+bad.RemoteAddr-b.mr.Addr()
		require.NoError(t, c.qp.PostSend([]rc.SendWR{bad, {ID: 9, Op: rc.OpWrite, Signaled: true}}))
		require.Equal(t, rc.StatusRemAccessErr, poll1(t, c.cq).Status)
		require.Equal(t, rc.StatusWRFlushErr, poll1(t, c.cq).Status)
	}
}

// TestDestroyedPeerQP: writes to a QP that was destroyed fail like writes to a peer that
// stopped answering.
func TestDestroyedPeerQP(t *testing.T) {
	a, b := newEnd(t), newEnd(t)
	require.NoError(t, a.qp.Connect(b.qp.Addr()))
	require.NoError(t, b.qp.Close())
	require.NoError(t, a.qp.PostSend([]rc.SendWR{{ID: 1, Op: rc.OpWrite, Signaled: true}}))
	c := poll1(t, a.cq)
	require.Equal(t, rc.StatusRetryExcErr, c.Status)
	require.Equal(t, "transport retry counter exceeded (12)", c.Status.String())
}

func TestRegisterRejectsForeignMemory(t *testing.T) {
	a, b := newEnd(t), newEnd(t)
	_, err := a.dev.Register(b.mem, rc.AccessLocalWrite)
	require.Error(t, err)
	_, err = a.dev.Register(a.mem, rc.AccessRemoteWrite)
	require.ErrorContains(t, err, "local write")
}
