package nccl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/internal/dl"
	"github.com/goccl/goccl/internal/p2ptest"
	"github.com/goccl/goccl/nccl/internal/fakelib"
)

// TestCommAllToAllVOffloads runs communicators over the nccl transport (the fakes: no
// GPU here): AllToAllV goes through the offloader (NCCL's grouped calls, counted under
// the nccl algorithm), a BatchSendRecv beside it over the NCCL links, and both deliver
// every byte.
func TestCommAllToAllVOffloads(t *testing.T) {
	if !dl.Supported {
		t.Skip("built without cgo: libraries cannot be loaded")
	}
	libs, err := fakelib.Build(t.TempDir())
	if errors.Is(err, fakelib.ErrNoCompiler) {
		t.Skip("no C compiler: cannot build the fake libnccl/libcudart")
	}
	require.NoError(t, err)
	t.Setenv("FAKE_LOG", t.TempDir()+"/calls.log")
	const w = 3
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	comms, err := goccl.InitLocal(ctx, w, goccl.WithTransport("nccl"), goccl.WithParam("nccl.lib", libs.NCCL),
		goccl.WithParam("cuda.lib", libs.CUDA), goccl.WithTimeout(30*time.Second))
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	errs := make([]error, w)
	done := make(chan int)
	for _, c := range comms {
		go func() {
			r := c.Rank()
			defer func() { done <- r }()
			count := func(src, dst int) int { return p2ptest.AllToAllVCount(src, dst, 2, w, 5001) }
			send, sc, rc, recvN := p2ptest.Blocks(r, w, 4, 1, count)
			recv := make([]byte, recvN)
			if errs[r] = c.AllToAllV(ctx, goccl.Host(send), sc, goccl.Host(recv), rc, goccl.Float32); errs[r] != nil {
				return
			}
			if errs[r] = p2ptest.CheckBlocks(recv, r, 4, 1, rc); errs[r] != nil {
				return
			}
			msgs, order := p2ptest.Random(7, w, 4*w, 5001)
			pops, verify := p2ptest.Ops(msgs, order[r], r, 100)
			ops := make([]goccl.P2POp, len(pops))
			for i, o := range pops {
				ops[i] = goccl.P2POp{Peer: o.Peer, Recv: o.Recv, Buf: goccl.Host(o.Buf), Count: o.Count, DType: o.DType}
			}
			if errs[r] = c.BatchSendRecv(ctx, ops); errs[r] == nil {
				errs[r] = verify()
			}
		}()
	}
	for range w {
		<-done
	}
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		st := comms[r].Stats()
		require.EqualValues(t, 1, st.ByAlgo["nccl"].Calls, "rank %d: the AllToAllV went through the offloader: %+v", r, st.ByAlgo)
		require.EqualValues(t, 1, st.ByAlgo["p2p"].Calls, "rank %d: the batch went over the links: %+v", r, st.ByAlgo)
	}
}
