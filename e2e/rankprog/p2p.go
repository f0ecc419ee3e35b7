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
			sc, rc := make([]int, w), make([]int, w)
			var send []byte
			recvN := 0
			for p := range w {
				sc[p] = p2ptest.AllToAllVCount(r, p, round, w, large)
				rc[p] = p2ptest.AllToAllVCount(p, r, round, w, large)
				recvN += rc[p] * esz
				send = append(send, p2ptest.Bytes(sc[p]*esz, r, p, round)...)
			}
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
			off := 0
			for p := range w {
				n := rc[p] * esz
				if err := p2ptest.Check(recv[off:off+n], p, r, round); err != nil {
					wrong(what, err)
					break
				}
				off += n
			}
		}
	}
	for seed := range uint64(6) {
		what := fmt.Sprintf("batch seed %d", seed)
		msgs, order := p2ptest.Random(seed, w, 6*w, large)
		bufs := map[int][]byte{}
		var ops []goccl.P2POp
		for _, o := range order[r] {
			m, x := o/2, msgs[o/2]
			n := x.Count * x.DType.Size()
			if o%2 == 0 {
				ops = append(ops, goccl.SendOp(goccl.Host(p2ptest.Bytes(n, x.Src, x.Dst, m)), x.Count, x.DType, x.Dst))
			} else {
				bufs[m] = make([]byte, n)
				ops = append(ops, goccl.RecvOp(goccl.Host(bufs[m]), x.Count, x.DType, x.Src))
			}
		}
		calls++
		if err := comm.BatchSendRecv(ctx, ops); err != nil {
			fmt.Printf("P2P-ERROR rank=%d case=%q err=%q\n", r, what, err.Error())
			return 1
		}
		for m, b := range bufs {
			if err := p2ptest.Check(b, msgs[m].Src, r, m); err != nil {
				wrong(what, err)
				break
			}
		}
	}
	fmt.Printf("P2P rank=%d calls=%d bad=%d\n", r, calls, bad)
	if bad > 0 {
		return 1
	}
	return 0
}
