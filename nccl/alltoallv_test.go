package nccl

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/internal/p2ptest"
	"github.com/goccl/goccl/transport"
)

// TestOffloadAllToAllV runs AllToAllV through the fakes as NCCL's grouped sends and
// receives: uneven blocks (0, 1, odd and 10007 elements) for three element sizes, on
// the host and on the device, apart and in place, every received byte checked against
// its sender's formula; and counts two ranks disagree on fail every rank with
// ErrMismatch naming the pair, before anything is sent, instead of hanging in NCCL.
func TestOffloadAllToAllV(t *testing.T) {
	p, log := useFakes(t, false)
	const w = 3
	eps := openAll(t, w, p)
	for round, dt := range []transport.DType{transport.Float32, transport.Int8, transport.Float64} {
		esz := dt.Size()
		count := func(src, dst int) int { return p2ptest.AllToAllVCount(src, dst, round, w, 10007) }
		for _, mode := range []string{"host", "host in place", "device", "device in place"} {
			name := fmt.Sprintf("%s/%s", dt, mode)
			recvs, rcs := make([][]byte, w), make([][]int, w)
			errs := onAll(w, func(r int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				send, sc, rc, recvN := p2ptest.Blocks(r, w, esz, round, count)
				rcs[r], recvs[r] = rc, make([]byte, recvN)
				c := &transport.Collective{Kind: transport.KindAllToAllV, DType: dt, Root: -1, SendPeer: -1, RecvPeer: -1,
					SendCounts: sc, RecvCounts: rc}
				big := max(len(send), recvN)
				switch mode {
				case "host":
					c.Send, c.Recv = transport.HostBuffer(send), transport.HostBuffer(recvs[r])
					return eps[r].Offload(ctx, c)
				case "host in place":
					buf := make([]byte, big)
					copy(buf, send)
					c.Send, c.Recv = transport.HostBuffer(buf[:len(send)]), transport.HostBuffer(buf[:recvN])
					err := eps[r].Offload(ctx, c)
					copy(recvs[r], buf)
					return err
				}
				dev := eps[r].dev
				sp, err := dev.Malloc(big + 1)
				if err != nil {
					return err
				}
				defer dev.Free(sp)
				rp := sp
				if mode == "device" {
					if rp, err = dev.Malloc(recvN + 1); err != nil {
						return err
					}
					defer dev.Free(rp)
				}
				if err := dev.CopyHtoD(sp, send); err != nil {
					return err
				}
				c.Send, c.Recv = dev.Buffer(sp, len(send)), dev.Buffer(rp, recvN)
				if err := eps[r].Offload(ctx, c); err != nil {
					return err
				}
				return dev.CopyDtoH(recvs[r], rp)
			})
			for r, err := range errs {
				require.NoError(t, err, "%s rank %d", name, r)
				require.NoError(t, p2ptest.CheckBlocks(recvs[r], r, esz, round, rcs[r]), "%s rank %d", name, r)
			}
		}
	}
	require.NotEmpty(t, calls(t, log, "ncclSend"), "the blocks went through NCCL's grouped sends")

	errs := onAll(w, func(r int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		sc, rc := []int{5, 5, 5}, []int{5, 5, 5}
		if r == 1 {
			rc[0] = 4
		}
		buf := make([]byte, 60)
		return eps[r].Offload(ctx, &transport.Collective{Kind: transport.KindAllToAllV, DType: transport.Int32, Root: -1,
			SendPeer: -1, RecvPeer: -1, Send: transport.HostBuffer(buf), Recv: transport.HostBuffer(make([]byte, 60)), SendCounts: sc, RecvCounts: rc})
	})
	for r, err := range errs {
		require.ErrorIs(t, err, transport.ErrMismatch, "rank %d", r)
		require.Contains(t, err.Error(), "rank 0 sends rank 1 5 elements, but rank 1 expects 4", "rank %d", r)
	}
}
