package goccl_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/internal/p2ptest"
	"github.com/goccl/goccl/transport"
)

// requireFailedBy checks that rank bad's call failed with an error that wraps is and
// says want, and every other rank's with one that names rank bad, none of them by
// waiting for the timeout.
func requireFailedBy(t *testing.T, errs []error, bad int, is error, want string) {
	t.Helper()
	require.ErrorIs(t, errs[bad], is)
	require.Contains(t, errs[bad].Error(), want)
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.False(t, errors.Is(err, goccl.ErrTimeout), "rank %d waited for the timeout: %v", r, err)
		if r != bad {
			require.Contains(t, err.Error(), fmt.Sprintf("rank %d", bad), "rank %d should name the failing rank: %v", r, err)
		}
	}
}

// toOps makes p2ptest's ops goccl's.
func toOps(ops []p2ptest.Op) []goccl.P2POp {
	out := make([]goccl.P2POp, len(ops))
	for i, o := range ops {
		out[i] = goccl.P2POp{Peer: o.Peer, Recv: o.Recv, Buf: goccl.Host(o.Buf), Count: o.Count, DType: o.DType}
	}
	return out
}

// TestAllToAllV exchanges uneven blocks between every pair, checks each received byte
// against the sender's formula, in place and apart, for every dtype size, at 1 to 5
// ranks over every local transport.
func TestAllToAllV(t *testing.T) {
	for _, tr := range []string{"inmem", "shm", "tcp"} {
		for _, world := range []int{1, 2, 3, 5} {
			t.Run(fmt.Sprintf("%s/w=%d", tr, world), func(t *testing.T) {
				large := 1<<17 + 3
				if raceEnabledExt && tr == "shm" {
					large = 1031 // see race_on_test.go
				}
				comms := local(t, world, goccl.WithTransport(tr), goccl.WithTimeout(30*time.Second))
				errs := runRanks(comms, func(c *goccl.Comm) error {
					ctx := context.Background()
					me := c.Rank()
					for round, dt := range p2ptest.DTypes {
						esz := dt.Size()
						for _, inPlace := range []bool{false, true} {
							send, sc, rc, recvN := p2ptest.Blocks(me, world, esz, round, func(src, dst int) int {
								return p2ptest.AllToAllVCount(src, dst, round, world, large)
							})
							recv := make([]byte, recvN+3) // longer than needed: the tail stays
							for i := range recv {
								recv[i] = 0xee
							}
							sb, tail := goccl.Host(send), recvN
							if inPlace {
								tail = max(len(send), recvN)
								buf := make([]byte, tail+3)
								copy(buf, send)
								for i := len(send); i < len(buf); i++ {
									buf[i] = 0xee
								}
								sb, recv = goccl.Host(buf[:len(send)]), buf
							}
							if err := c.AllToAllV(ctx, sb, sc, goccl.Host(recv), rc, dt); err != nil {
								return err
							}
							if err := p2ptest.CheckBlocks(recv, me, esz, round, rc); err != nil {
								return fmt.Errorf("rank %d, %s, in place %v: %w", me, dt, inPlace, err)
							}
							for i := tail; i < len(recv); i++ {
								if recv[i] != 0xee {
									return fmt.Errorf("rank %d: byte %d past the %d received was written", me, i, recvN)
								}
							}
						}
					}
					return nil
				})
				for r, err := range errs {
					require.NoError(t, err, "rank %d", r)
				}
			})
		}
	}
}

// TestAllToAllVSliceAsync runs AllToAllVSlice and the asynchronous form between
// collectives, so that its messages and theirs share the links in issue order.
func TestAllToAllVSliceAsync(t *testing.T) {
	const world = 3
	comms := local(t, world, goccl.WithTransport("tcp"), goccl.WithTimeout(20*time.Second))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx := context.Background()
		me := c.Rank()
		sc := []int{me + 1, me + 1, me + 1} // rank i sends i+1 elements to each
		rc := []int{1, 2, 3}
		send := make([]float64, 3*(me+1))
		for i := range send {
			send[i] = float64(me*100 + i)
		}
		recv := make([]float64, 6)
		w := c.AllToAllVAsync(ctx, goccl.HostSlice(send), sc, goccl.HostSlice(recv), rc, goccl.Float64)
		sc[0] = -1 // the call copied its counts
		sum := []float64{float64(me)}
		if err := goccl.AllReduceSlice(ctx, c, sum, goccl.Sum); err != nil {
			return err
		}
		if err := w.Wait(ctx); err != nil {
			return err
		}
		if sum[0] != 3 {
			return fmt.Errorf("rank %d: allreduce gave %v, want 3", me, sum[0])
		}
		off := 0
		for p := range world {
			for i := range rc[p] {
				if want := float64(p*100 + me*(p+1) + i); recv[off+i] != want {
					return fmt.Errorf("rank %d: element %d from rank %d is %v, want %v", me, i, p, recv[off+i], want)
				}
			}
			off += rc[p]
		}
		back := make([]float64, 3*(me+1))
		if err := goccl.AllToAllVSlice(ctx, c, recv, rc, back, []int{me + 1, me + 1, me + 1}); err != nil {
			return err
		}
		for i := range back {
			if back[i] != send[i] {
				return fmt.Errorf("rank %d: the round trip gave %v at %d, want %v", me, back[i], i, send[i])
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

// TestAllToAllVCountsDisagree: rank 1 expects one element fewer from rank 0 than rank 0
// sends. Rank 1 fails with ErrMismatch naming both counts, and every rank fails, in this
// call or the next, without waiting for the timeout.
func TestAllToAllVCountsDisagree(t *testing.T) {
	for _, tr := range []string{"inmem", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			comms := local(t, 3, goccl.WithTransport(tr), goccl.WithTimeout(20*time.Second))
			errs := runRanks(comms, func(c *goccl.Comm) error {
				ctx := context.Background()
				counts := []int{5, 5, 5}
				rc := []int{5, 5, 5}
				if c.Rank() == 1 {
					rc[0] = 4
				}
				send, recv := make([]int32, 15), make([]int32, 15)
				if err := c.AllToAllV(ctx, goccl.HostSlice(send), counts, goccl.HostSlice(recv), rc, goccl.Int32); err != nil {
					return err
				}
				return c.Barrier(ctx)
			})
			require.ErrorIs(t, errs[1], goccl.ErrMismatch)
			require.Contains(t, errs[1].Error(), "count=4")
			require.Contains(t, errs[1].Error(), "count=5")
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				require.False(t, errors.Is(err, goccl.ErrTimeout), "rank %d waited for the timeout: %v", r, err)
			}
		})
	}
}

// TestAllToAllVBadInput: each mistake fails the rank that made it with ErrInvalid and a
// message that says what is wrong, and its peers with an error that names it.
func TestAllToAllVBadInput(t *testing.T) {
	const world = 3
	cases := []struct {
		name       string
		sc, rc     []int
		sendLen    int
		dt         goccl.DType
		wantSubstr string
	}{
		{"too few counts", []int{1, 1}, []int{1, 1, 1}, 3, goccl.Float32, "2 send counts, need one per rank (3)"},
		{"negative", []int{1, -1, 1}, []int{1, 1, 1}, 3, goccl.Float32, "send count for rank 1 is negative"},
		{"short buffer", []int{1, 1, 2}, []int{1, 1, 1}, 3, goccl.Float32, "send buffer is 12 bytes, need 16"},
		{"self", []int{1, 1, 1}, []int{1, 2, 1}, 3, goccl.Float32, "sends itself 1 elements"},
		{"dtype", []int{1, 1, 1}, []int{1, 1, 1}, 3, goccl.DType(99), "unknown dtype 99"},
		{"overflow", []int{1, 1 << 62, 1 << 62}, []int{1, 1, 1}, 3, goccl.Float32, "add up to more elements"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			comms := local(t, world, goccl.WithTimeout(20*time.Second))
			errs := runRanks(comms, func(c *goccl.Comm) error {
				sc, rc, n, dt := []int{1, 1, 1}, []int{1, 1, 1}, 3, goccl.Float32
				if c.Rank() == 1 {
					sc, rc, n, dt = tc.sc, tc.rc, tc.sendLen, tc.dt
				}
				send, recv := make([]float32, n), make([]float32, 8)
				return c.AllToAllV(context.Background(), goccl.HostSlice(send), sc, goccl.HostSlice(recv), rc, dt)
			})
			requireFailedBy(t, errs, 1, goccl.ErrInvalid, tc.wantSubstr)
		})
	}
}

// TestBatchSendRecv runs random batches: every rank sends random messages (of every
// size class and dtype, to itself too) to random peers, its ops in a random order, and
// checks every byte received. The large messages are sent before they are received on
// both sides, which completes only because a batch runs its ops at once.
func TestBatchSendRecv(t *testing.T) {
	for _, tr := range []string{"inmem", "shm", "tcp"} {
		for _, world := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/w=%d", tr, world), func(t *testing.T) {
				large := 1<<19 + 5
				if raceEnabledExt && tr == "shm" {
					large = 1031
				}
				comms := local(t, world, goccl.WithTransport(tr), goccl.WithTimeout(30*time.Second))
				for seed := range uint64(4) {
					msgs, order := p2ptest.Random(seed*100+uint64(world), world, 6*world, large)
					errs := runRanks(comms, func(c *goccl.Comm) error {
						ops, verify := p2ptest.Ops(msgs, order[c.Rank()], c.Rank(), 0)
						if err := c.BatchSendRecv(context.Background(), toOps(ops)); err != nil {
							return err
						}
						if err := verify(); err != nil {
							return fmt.Errorf("seed %d, rank %d: %w", seed, c.Rank(), err)
						}
						return nil
					})
					for r, err := range errs {
						require.NoError(t, err, "rank %d", r)
					}
				}
			})
		}
	}
}

// TestBatchSendRecvMatchesSendRecv: a batch's messages are those of Send, Recv and
// SendRecv, matched in one order per pair; a count that disagrees is ErrMismatch on
// the receiving rank and fails every rank.
func TestBatchSendRecvMatchesSendRecv(t *testing.T) {
	const world = 3
	comms := local(t, world, goccl.WithTransport("tcp"), goccl.WithTimeout(20*time.Second))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx := context.Background()
		switch c.Rank() {
		case 0: // batches what its peers do one call at a time
			got1, got2 := make([]int32, 2), make([]int32, 1)
			if err := c.BatchSendRecv(ctx, []goccl.P2POp{
				goccl.RecvOp(goccl.HostSlice(got2), 1, goccl.Int32, 2),
				goccl.SendOp(goccl.HostSlice([]int32{10, 11}), 2, goccl.Int32, 1),
				goccl.SendOp(goccl.HostSlice([]int32{20}), 1, goccl.Int32, 1),
				goccl.RecvOp(goccl.HostSlice(got1), 2, goccl.Int32, 1),
			}); err != nil {
				return err
			}
			if got1[0] != 110 || got1[1] != 111 || got2[0] != 220 {
				return fmt.Errorf("rank 0 got %v and %v, want [110 111] and [220]", got1, got2)
			}
		case 1:
			x, y := make([]int32, 2), make([]int32, 1)
			if err := c.Recv(ctx, goccl.HostSlice(x), 2, goccl.Int32, 0); err != nil {
				return err
			}
			if err := c.Recv(ctx, goccl.HostSlice(y), 1, goccl.Int32, 0); err != nil {
				return err
			}
			if x[0] != 10 || x[1] != 11 || y[0] != 20 {
				return fmt.Errorf("rank 1 got %v and %v, want [10 11] and [20]", x, y)
			}
			if err := c.Send(ctx, goccl.HostSlice([]int32{110, 111}), 2, goccl.Int32, 0); err != nil {
				return err
			}
		case 2:
			if err := c.Send(ctx, goccl.HostSlice([]int32{220}), 1, goccl.Int32, 0); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}

	comms = local(t, 2, goccl.WithTransport("tcp"), goccl.WithTimeout(20*time.Second))
	errs = runRanks(comms, func(c *goccl.Comm) error {
		ctx := context.Background()
		buf := make([]float32, 4)
		op := goccl.SendOp(goccl.HostSlice(buf), 4, goccl.Float32, 1)
		if c.Rank() == 1 {
			op = goccl.RecvOp(goccl.HostSlice(buf), 3, goccl.Float32, 0)
		}
		if err := c.BatchSendRecv(ctx, []goccl.P2POp{op}); err != nil {
			return err
		}
		return c.Barrier(ctx)
	})
	require.ErrorIs(t, errs[1], goccl.ErrMismatch)
	require.Contains(t, errs[1].Error(), "count=3")
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.False(t, errors.Is(err, goccl.ErrTimeout), "rank %d: %v", r, err)
	}
}

// TestBatchSendRecvInPlaceRing: every rank sends its buffer to the next and receives
// the previous rank's into the same memory, in one batch; then a plain order check
// between two batches and single calls.
func TestBatchSendRecvInPlaceRing(t *testing.T) {
	for _, tr := range []string{"inmem", "shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			const world = 4
			comms := local(t, world, goccl.WithTransport(tr), goccl.WithTimeout(20*time.Second))
			errs := runRanks(comms, func(c *goccl.Comm) error {
				ctx := context.Background()
				me := c.Rank()
				next, prev := (me+1)%world, (me+world-1)%world
				for _, n := range []int{0, 1, 7, 1<<16 + 1} {
					buf := make([]int64, n)
					for i := range buf {
						buf[i] = p2ptest.Value(me, next, n, i)
					}
					if err := c.BatchSendRecv(ctx, []goccl.P2POp{
						goccl.RecvOp(goccl.HostSlice(buf), n, goccl.Int64, prev),
						goccl.SendOp(goccl.HostSlice(buf), n, goccl.Int64, next),
					}); err != nil {
						return err
					}
					for i, x := range buf {
						if want := p2ptest.Value(prev, me, n, i); x != want {
							return fmt.Errorf("rank %d, %d elements: [%d] = %d, want %d", me, n, i, x, want)
						}
					}
					// The batch's messages and a SendRecv's share each pair's order.
					one := []int64{int64(me)}
					got := make([]int64, 1)
					if err := c.SendRecv(ctx, goccl.HostSlice(one), next, goccl.HostSlice(got), prev, 1, goccl.Int64); err != nil {
						return err
					}
					if got[0] != int64(prev) {
						return fmt.Errorf("rank %d: SendRecv after a batch got %d, want %d", me, got[0], prev)
					}
				}
				return nil
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
		})
	}
}

// TestBatchSendRecvBadInput: a bad op fails its rank with a message that names the op,
// and every peer with one that names the rank.
func TestBatchSendRecvBadInput(t *testing.T) {
	const world = 3
	b := make([]byte, 64)
	cases := []struct {
		name string
		ops  []goccl.P2POp
		is   error
		want string
	}{
		{"peer", []goccl.P2POp{goccl.SendOp(goccl.Host(b), 1, goccl.Int8, 3)}, goccl.ErrInvalid, "peer 3 outside the communicator (valid: 0..2)"},
		{"negative", []goccl.P2POp{goccl.RecvOp(goccl.Host(b), -2, goccl.Int8, 0)}, goccl.ErrInvalid, "negative count"},
		{"short", []goccl.P2POp{goccl.SendOp(goccl.Host(b), 9, goccl.Float64, 0)}, goccl.ErrInvalid, "the buffer is 64 bytes, need 9 x 8-byte float64"},
		{"dtype", []goccl.P2POp{goccl.SendOp(goccl.Host(b), 1, goccl.DType(99), 0)}, goccl.ErrInvalid, "unknown dtype"},
		{"overlap", []goccl.P2POp{goccl.RecvOp(goccl.Host(b[:8]), 8, goccl.Int8, 0), goccl.RecvOp(goccl.Host(b[4:]), 4, goccl.Int8, 2)}, goccl.ErrInvalid,
			"op 0 (recv 8 int8 from rank 0) and op 1 (recv 4 int8 from rank 2) receive into the same memory"},
		{"self unpaired", []goccl.P2POp{goccl.SendOp(goccl.Host(b), 1, goccl.Int8, 1)}, goccl.ErrInvalid, "1 sends to this rank itself but 0 receives"},
		{"self mismatch", []goccl.P2POp{goccl.SendOp(goccl.Host(b), 2, goccl.Int8, 1), goccl.RecvOp(goccl.Host(b[8:]), 2, goccl.Uint8, 1)}, goccl.ErrMismatch, "must have the same count and dtype"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			comms := local(t, world, goccl.WithTimeout(20*time.Second))
			errs := runRanks(comms, func(c *goccl.Comm) error {
				ctx := context.Background()
				if c.Rank() == 1 {
					return c.BatchSendRecv(ctx, tc.ops)
				}
				// The others wait for rank 1 in a batch of their own.
				got := make([]byte, 1)
				return c.BatchSendRecv(ctx, []goccl.P2POp{goccl.RecvOp(goccl.Host(got), 1, goccl.Int8, 1)})
			})
			requireFailedBy(t, errs, 1, tc.is, tc.want)
		})
	}
}

// TestBatchSendRecvPeerAborts: rank 2 aborts while ranks 0 and 1 wait in a batch for
// its messages; they fail at once, naming it, instead of waiting for the timeout.
func TestBatchSendRecvPeerAborts(t *testing.T) {
	const world = 3
	comms := local(t, world, goccl.WithTransport("tcp"), goccl.WithTimeout(60*time.Second))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		if c.Rank() == 2 {
			time.Sleep(200 * time.Millisecond)
			c.Abort(errors.New("rank 2 stops"))
			return nil
		}
		big := make([]byte, 4<<20)
		other := 1 - c.Rank()
		return c.BatchSendRecv(context.Background(), []goccl.P2POp{
			goccl.SendOp(goccl.Host(big), len(big), goccl.Uint8, other),
			goccl.RecvOp(goccl.Host(make([]byte, len(big))), len(big), goccl.Uint8, other),
			goccl.RecvOp(goccl.Host(make([]byte, 8)), 8, goccl.Uint8, 2),
		})
	})
	for r := range 2 {
		require.Error(t, errs[r], "rank %d", r)
		require.False(t, errors.Is(errs[r], goccl.ErrTimeout), "rank %d: %v", r, errs[r])
		require.Contains(t, errs[r].Error(), "rank 2", "rank %d", r)
	}
}

// fakeDevice is device memory for tests on a machine without a GPU: an arena of host
// memory at made-up device addresses, and a transport.Stager that copies through it,
// counting the pinned buffers not yet given back.
type fakeDevice struct {
	mu     sync.Mutex
	mem    []byte
	used   int
	pinned int
}

const fakeBase = 1 << 40

func (d *fakeDevice) alloc(n int) goccl.Buffer {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := goccl.DeviceBuffer(fakeBase+uintptr(d.used), n, 0)
	d.used += n
	return b
}

func (d *fakeDevice) bytes(b goccl.Buffer) []byte {
	off := int(b.Ptr() - fakeBase)
	return d.mem[off : off+b.Len()]
}

func (d *fakeDevice) ToHost(_ context.Context, dst []byte, src goccl.Buffer) error {
	copy(dst, d.bytes(src))
	return nil
}

func (d *fakeDevice) FromHost(_ context.Context, dst goccl.Buffer, src []byte) error {
	copy(d.bytes(dst), src)
	return nil
}

func (d *fakeDevice) PinnedAlloc(n int) ([]byte, func(), error) {
	d.mu.Lock()
	d.pinned++
	d.mu.Unlock()
	return make([]byte, n), func() {
		d.mu.Lock()
		d.pinned--
		d.mu.Unlock()
	}, nil
}

// TestDeviceBuffersP2P: AllToAllV and BatchSendRecv on device buffers (a fake device:
// no GPU here) stage them through pinned host memory and copy the result back: device
// to device, device to host, in place on the device, and a batch whose device send is
// the memory its device receive overwrites. Every byte is checked, and every pinned
// buffer is given back.
func TestDeviceBuffersP2P(t *testing.T) {
	dev := &fakeDevice{mem: make([]byte, 64<<20)}
	prev := transport.RegisterStager(func() (transport.Stager, error) { return dev, nil })
	t.Cleanup(func() { transport.RegisterStager(prev) })
	const world = 3
	comms := local(t, world, goccl.WithTransport("tcp"), goccl.WithTimeout(20*time.Second))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx := context.Background()
		me := c.Rank()
		for round, mode := range []string{"device", "to host", "in place"} {
			dt := goccl.Float32
			send, sc, rc, recvN := p2ptest.Blocks(me, world, 4, round, func(src, dst int) int {
				return p2ptest.AllToAllVCount(src, dst, round, world, 70001)
			})
			sb := dev.alloc(max(len(send), recvN))
			copy(dev.bytes(sb), send)
			rb, out := dev.alloc(recvN), func(b goccl.Buffer) []byte { return dev.bytes(b) }
			switch mode {
			case "to host":
				host := make([]byte, recvN)
				rb, out = goccl.Host(host), func(goccl.Buffer) []byte { return host }
			case "in place":
				rb = sb
			}
			if err := c.AllToAllV(ctx, sb, sc, rb, rc, dt); err != nil {
				return err
			}
			if err := p2ptest.CheckBlocks(out(rb), me, 4, round, rc); err != nil {
				return fmt.Errorf("rank %d, AllToAllV %s: %w", me, mode, err)
			}
		}
		// A ring shift in place on the device, and a host message beside it.
		next, prev := (me+1)%world, (me+world-1)%world
		const n = 5000
		buf := dev.alloc(8 * n)
		copy(dev.bytes(buf), p2ptest.Bytes(8*n, me, next, 9))
		host := make([]byte, 3)
		if err := c.BatchSendRecv(ctx, []goccl.P2POp{
			goccl.RecvOp(buf, n, goccl.Int64, prev),
			goccl.SendOp(goccl.Host(p2ptest.Bytes(3, me, prev, 10)), 3, goccl.Uint8, prev),
			goccl.SendOp(buf, n, goccl.Int64, next),
			goccl.RecvOp(goccl.Host(host), 3, goccl.Uint8, next),
		}); err != nil {
			return err
		}
		if err := p2ptest.Check(dev.bytes(buf), prev, me, 9); err != nil {
			return fmt.Errorf("rank %d, batch on the device: %w", me, err)
		}
		if err := p2ptest.Check(host, next, me, 10); err != nil {
			return fmt.Errorf("rank %d, batch's host message: %w", me, err)
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	require.Zero(t, dev.pinned, "pinned buffers not given back")
}

// TestBatchSendRecvSendsDataFromBeforeTheCall: rank 0 receives rank 1's message into
// the buffer it sends rank 2 in the same batch. Rank 2 takes its message late, so rank
// 1's has landed while rank 0's send (larger than the socket buffers) is still under
// way: what rank 2 gets must still be rank 0's data from before the call.
func TestBatchSendRecvSendsDataFromBeforeTheCall(t *testing.T) {
	const n = 8 << 20
	comms := local(t, 3, goccl.WithTransport("tcp"), goccl.WithTimeout(20*time.Second))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx := context.Background()
		switch c.Rank() {
		case 0:
			buf := p2ptest.Bytes(n, 0, 2, 0)
			if err := c.BatchSendRecv(ctx, []goccl.P2POp{
				goccl.RecvOp(goccl.Host(buf), n, goccl.Uint8, 1),
				goccl.SendOp(goccl.Host(buf), n, goccl.Uint8, 2),
			}); err != nil {
				return err
			}
			return p2ptest.Check(buf, 1, 0, 0)
		case 1:
			return c.Send(ctx, goccl.Host(p2ptest.Bytes(n, 1, 0, 0)), n, goccl.Uint8, 0)
		}
		time.Sleep(300 * time.Millisecond)
		got := make([]byte, n)
		if err := c.Recv(ctx, goccl.Host(got), n, goccl.Uint8, 0); err != nil {
			return err
		}
		return p2ptest.Check(got, 0, 2, 0)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
