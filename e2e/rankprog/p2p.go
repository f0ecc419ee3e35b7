package main

import (
	"context"
	"fmt"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/internal/p2ptest"
)

// runP2P runs AllToAllV with uneven counts (0, 1, odd and a block of a few MiB) for
// every element size, apart and in place, then random batches of BatchSendRecv; each
// received byte is checked against its sender's formula (p2ptest). It prints one line
// per wrong call and "P2P rank=R calls=N bad=B".
func runP2P(ctx context.Context, comm *goccl.Comm) int {
	r, w := comm.Rank(), comm.Size()
	const large = 1<<20 + 3
	calls, bad := 0, 0
	wrong := func(what string, err error) {
		bad++
		fmt.Printf("P2P-WRONG rank=%d case=%q %s\n", r, what, err)
	}
	for round, dt := range p2ptest.DTypes {
		esz := dt.Size()
		for _, inPlace := range []bool{false, true} {
			what := fmt.Sprintf("alltoallv %s in place %t", dt, inPlace)
			send, sc, rc, recvN := p2ptest.Blocks(r, w, esz, round, func(src, dst int) int {
				return p2ptest.AllToAllVCount(src, dst, round, w, large)
			})
			sb, recv := goccl.Host(send), make([]byte, recvN)
			if inPlace {
				buf := make([]byte, max(len(send), recvN))
				copy(buf, send)
				sb, recv = goccl.Host(buf[:len(send)]), buf[:recvN]
			}
			calls++
			if err := comm.AllToAllV(ctx, sb, sc, goccl.Host(recv), rc, dt); err != nil {
				fmt.Printf("P2P-ERROR rank=%d case=%q err=%q\n", r, what, err.Error())
				return 1
			}
			if err := p2ptest.CheckBlocks(recv, r, esz, round, rc); err != nil {
				wrong(what, err)
			}
		}
	}
	for seed := range uint64(6) {
		what := fmt.Sprintf("batch seed %d", seed)
		msgs, order := p2ptest.Random(seed, w, 6*w, large)
		pops, verify := p2ptest.Ops(msgs, order[r], r, 0)
		ops := make([]goccl.P2POp, len(pops))
		for i, o := range pops {
			ops[i] = goccl.P2POp{Peer: o.Peer, Recv: o.Recv, Buf: goccl.Host(o.Buf), Count: o.Count, DType: o.DType}
		}
		calls++
		if err := comm.BatchSendRecv(ctx, ops); err != nil {
			fmt.Printf("P2P-ERROR rank=%d case=%q err=%q\n", r, what, err.Error())
			return 1
		}
		if err := verify(); err != nil {
			wrong(what, err)
		}
	}
	fmt.Printf("P2P rank=%d calls=%d bad=%d\n", r, calls, bad)
	if bad > 0 {
		return 1
	}
	return 0
}
