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
	"github.com/goccl/goccl/transport"
)

// runRanks calls fn on every communicator concurrently and returns each rank's error.
func runRanks(comms []*goccl.Comm, fn func(c *goccl.Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(c)
		}()
	}
	wg.Wait()
	return errs
}

func local(t *testing.T, world int, opts ...goccl.Option) []*goccl.Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comms, err := goccl.InitLocal(ctx, world, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

func TestAllReduceSliceEveryAlgo(t *testing.T) {
	for _, algo := range []string{"auto", "ring", "tree", "naive"} {
		for _, world := range []int{1, 2, 3, 5} {
			t.Run(fmt.Sprintf("%s/w%d", algo, world), func(t *testing.T) {
				comms := local(t, world, goccl.WithAlgo(algo))
				const n = 1001
				errs := runRanks(comms, func(c *goccl.Comm) error {
					xs := make([]int64, n)
					for i := range xs {
						xs[i] = int64(c.Rank()*n + i)
					}
					if err := goccl.AllReduceSlice(context.Background(), c, xs, goccl.Sum); err != nil {
						return err
					}
					for i, x := range xs {
						// sum over r of r*n+i = n*W(W-1)/2 + W*i
						want := int64(n*world*(world-1)/2 + world*i)
						if x != want {
							return fmt.Errorf("rank %d: xs[%d] = %d, want %d", c.Rank(), i, x, want)
						}
					}
					return nil
				})
				for _, err := range errs {
					require.NoError(t, err)
				}
			})
		}
	}
}

func TestMismatchedCountsFailEveryRank(t *testing.T) {
	comms := local(t, 3, goccl.WithAlgo("ring"), goccl.WithTimeout(20*time.Second))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		n := 64
		if c.Rank() == 1 {
			n = 65
		}
		xs := make([]float32, n)
		return goccl.AllReduceSlice(context.Background(), c, xs, goccl.Sum)
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.True(t, errors.Is(err, goccl.ErrMismatch) || errors.Is(err, goccl.ErrPeer), "rank %d: %v", r, err)
		require.False(t, errors.Is(err, goccl.ErrTimeout), "rank %d waited for the timeout: %v", r, err)
	}
	// The communicator is unusable afterwards, with the same error.
	require.Error(t, comms[0].Barrier(context.Background()))
}

func TestRecvTooSmallOnOneRankFailsEveryRank(t *testing.T) {
	comms := local(t, 4, goccl.WithAlgo("ring"), goccl.WithTimeout(20*time.Second))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		send := make([]float32, 16)
		recv := make([]float32, 4*16)
		if c.Rank() == 2 {
			recv = recv[:4*16-1]
		}
		return c.AllGather(context.Background(), goccl.HostSlice(send), goccl.HostSlice(recv), 16, goccl.Float32)
	})
	requireFailedBy(t, errs, 2, goccl.ErrInvalid, "recv")
}

func TestInvalidRootFailsEveryRank(t *testing.T) {
	comms := local(t, 3, goccl.WithTimeout(20*time.Second))
	errs := runRanks(comms, func(c *goccl.Comm) error {
		xs := make([]int32, 8)
		return goccl.BroadcastSlice(context.Background(), c, xs, 7)
	})
	for r, err := range errs {
		require.ErrorIs(t, err, goccl.ErrInvalid, "rank %d", r)
		require.Contains(t, err.Error(), "root", "rank %d", r)
	}
}

func TestAsyncRunsInIssueOrder(t *testing.T) {
	comms := local(t, 2)
	errs := runRanks(comms, func(c *goccl.Comm) error {
		ctx := context.Background()
		bufs := make([][]float64, 8)
		works := make([]*goccl.Work, len(bufs))
		for i := range bufs {
			bufs[i] = make([]float64, 100+i)
			for j := range bufs[i] {
				bufs[i][j] = float64(i + j + c.Rank())
			}
			b := goccl.HostSlice(bufs[i])
			works[i] = c.AllReduceAsync(ctx, b, b, len(bufs[i]), goccl.Float64, goccl.Max)
		}
		for i, w := range works {
			if err := w.Wait(ctx); err != nil {
				return err
			}
			for j, x := range bufs[i] {
				if x != float64(i+j+1) {
					return fmt.Errorf("buf %d[%d] = %v, want %v", i, j, x, i+j+1)
				}
			}
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestSendRecvRingShift(t *testing.T) {
	const world = 4
	comms := local(t, world)
	errs := runRanks(comms, func(c *goccl.Comm) error {
		r := c.Rank()
		send := []int32{int32(r), int32(r * 10), int32(r * 100)}
		recv := make([]int32, 3)
		if err := c.SendRecv(context.Background(), goccl.HostSlice(send), (r+1)%world,
			goccl.HostSlice(recv), (r+world-1)%world, 3, goccl.Int32); err != nil {
			return err
		}
		p := int32((r + world - 1) % world)
		if recv[0] != p || recv[1] != p*10 || recv[2] != p*100 {
			return fmt.Errorf("rank %d got %v from rank %d", r, recv, p)
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestSendRecvBadPeer(t *testing.T) {
	comms := local(t, 2)
	err := comms[0].Send(context.Background(), goccl.HostSlice([]int32{1}), 1, goccl.Int32, 5)
	require.ErrorIs(t, err, goccl.ErrInvalid)
	require.Contains(t, err.Error(), "valid: 0..1")
}

func TestSplit(t *testing.T) {
	const world = 5
	comms := local(t, world)
	subs := make([]*goccl.Comm, world)
	errs := runRanks(comms, func(c *goccl.Comm) error {
		color := c.Rank() % 2
		if c.Rank() == 4 {
			color = -1
		}
		sub, err := c.Split(context.Background(), color, -c.Rank())
		if err != nil {
			return err
		}
		subs[c.Rank()] = sub
		if sub == nil {
			return nil
		}
		xs := []int64{int64(c.Rank())}
		return goccl.AllReduceSlice(context.Background(), sub, xs, goccl.Sum)
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Nil(t, subs[4])
	// Evens {0, 2}: keys 0, -2 -> rank 2 first.
	require.Equal(t, 2, subs[0].Size())
	require.Equal(t, 1, subs[0].Rank())
	require.Equal(t, 0, subs[2].Rank())
	require.Equal(t, 2, subs[1].Size())
	for _, s := range subs {
		if s != nil {
			s.Close()
		}
	}
}

func TestClosedCommReturnsErrClosed(t *testing.T) {
	comms := local(t, 1)
	require.NoError(t, comms[0].Close())
	err := comms[0].Barrier(context.Background())
	require.ErrorIs(t, err, goccl.ErrClosed)
}

func TestDeviceBufferWithoutCUDA(t *testing.T) {
	comms := local(t, 1)
	d := goccl.DeviceBuffer(0x7f0000000000, 64, 0)
	err := comms[0].AllReduce(context.Background(), d, d, 16, goccl.Float32, goccl.Sum)
	require.ErrorIs(t, err, goccl.ErrNotSupported)
}

func TestInitBadInput(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		cfg  goccl.Config
		want string
	}{
		{"rank unset", goccl.DefaultConfig(), "not set"},
		{"rank out of range", goccl.DefaultConfig().Apply(goccl.WithRank(4, 4)), "valid: 0..3"},
		{"unknown transport", goccl.DefaultConfig().Apply(goccl.WithRank(0, 1), goccl.WithTransport("carrier-pigeon")), "valid:"},
		{"unknown algo", goccl.DefaultConfig().Apply(goccl.WithRank(0, 1), goccl.WithAlgo("bogus")), "valid"},
		{"no store", goccl.DefaultConfig().Apply(goccl.WithRank(0, 2)), "GOCCL_STORE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := goccl.Init(ctx, tc.cfg)
			require.ErrorIs(t, err, goccl.ErrInvalid)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestInitStoreUnreachableIsBounded(t *testing.T) {
	cfg := goccl.DefaultConfig().Apply(goccl.WithRank(1, 2), goccl.WithStoreAddr("127.0.0.1:1"),
		goccl.WithInitTimeout(time.Second))
	start := time.Now()
	_, err := goccl.Init(context.Background(), cfg)
	require.Error(t, err)
	require.Less(t, time.Since(start), 20*time.Second, "Init must give up near its timeout: %v", err)
	require.Contains(t, err.Error(), "127.0.0.1:1")
}

func TestWorldSizeDisagreement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store := newMemStore()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, world := range []int{2, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := goccl.DefaultConfig().Apply(goccl.WithTransport("inmem"), goccl.WithStore(store),
				goccl.WithRank(r, world), goccl.WithInitTimeout(5*time.Second))
			c, err := goccl.Init(ctx, cfg)
			if c != nil {
				c.Close()
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
	}
	require.Contains(t, errs[0].Error(), "world size")
}

// TestSendRecvInPlace: a ring shift with SendRecv, in place and into another buffer,
// over every transport goroutine ranks can use, at 0, 1, odd and large sizes (past the
// links' eager size, where sender and receiver wait for each other), three calls in a
// row per size (the receive runs on a goroutine that lives from call to call), each
// checked element by element; mixed with Send and Recv alone.
func TestSendRecvInPlace(t *testing.T) {
	const world = 3
	for _, tr := range []string{"inmem", "shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			sizes := []int{0, 1, 7, 1031, 1<<17 + 3}
			if raceEnabledExt && tr == "shm" {
				sizes = sizes[:4] // see race_on_test.go
			}
			comms := local(t, world, goccl.WithTransport(tr), goccl.WithTimeout(20*time.Second))
			errs := runRanks(comms, func(c *goccl.Comm) error {
				ctx := context.Background()
				r := c.Rank()
				next, prev := (r+1)%world, (r+world-1)%world
				for _, n := range sizes {
					for call := range 3 {
						for _, inPlace := range []bool{true, false} {
							buf := make([]int64, n)
							for i := range buf {
								buf[i] = int64(r*1000003 + call*7919 + i)
							}
							out := buf
							if !inPlace {
								out = make([]int64, n)
							}
							if err := c.SendRecv(ctx, goccl.HostSlice(buf), next, goccl.HostSlice(out), prev, n, goccl.Int64); err != nil {
								return err
							}
							for i, x := range out {
								if want := int64(prev*1000003 + call*7919 + i); x != want {
									return fmt.Errorf("rank %d, %d elements, call %d, in place %v: [%d] = %d, want %d", r, n, call, inPlace, i, x, want)
								}
							}
						}
					}
					// Send and Recv alone, even ranks first, so that nobody waits on itself.
					one := []int64{int64(r*10 + n)}
					got := make([]int64, 1)
					for turn := range 2 {
						if (r%2 == 0) == (turn == 0) {
							if err := c.Send(ctx, goccl.HostSlice(one), 1, goccl.Int64, next); err != nil {
								return err
							}
						} else if err := c.Recv(ctx, goccl.HostSlice(got), 1, goccl.Int64, prev); err != nil {
							return err
						}
					}
					if got[0] != int64(prev*10+n) {
						return fmt.Errorf("rank %d: Recv got %d from rank %d, want %d", r, got[0], prev, prev*10+n)
					}
				}
				return nil
			})
			for _, err := range errs {
				require.NoError(t, err)
			}
		})
	}
}

// A transport setting the transport refuses is reported as the user's mistake
// (ErrInvalid, naming the setting), not as "not supported" on this host.
func TestInitBadTransportSettingIsInvalid(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := goccl.InitLocal(ctx, 2, goccl.WithTransport("tcp"), goccl.WithParam("tcp.bufsize", "8Q"))
	require.Error(t, err)
	require.ErrorIs(t, err, transport.ErrInvalid)
	require.NotErrorIs(t, err, transport.ErrNotSupported)
	require.Contains(t, err.Error(), `tcp.bufsize="8Q"`)
	require.NotContains(t, err.Error(), "tcp: tcp:")
}

// TestInitRefusesLinksBelowTheEagerFloor: a link that cannot hold two unreceived 16 KiB
// messages (rdma's software provider with two 4 KiB slots) would deadlock the
// algorithms' small steps, so Init fails on the ranks it joins, naming the link and the
// settings to change; with enough slots the same communicator runs an 8-byte AllReduce.
func TestInitRefusesLinksBelowTheEagerFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := func(credits string) []goccl.Option {
		return []goccl.Option{goccl.WithTransport("rdma"), goccl.WithParam("rdma.provider", "soft"),
			goccl.WithParam("rdma.chunk_bytes", "4096"), goccl.WithParam("rdma.credits", credits), goccl.WithInitTimeout(10 * time.Second)}
	}
	_, err := goccl.InitLocal(ctx, 2, opts("2")...)
	require.ErrorIs(t, err, goccl.ErrInvalid)
	require.ErrorContains(t, err, "takes 4056 bytes without a running receive")
	require.ErrorContains(t, err, "rdma.credits")

	comms, err := goccl.InitLocal(ctx, 2, opts("10")...)
	require.NoError(t, err)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	got := make([][]float32, 2)
	errs := make([]error, 2)
	for r, c := range comms {
		got[r] = []float32{float32(r + 1), 0.5}
		wg.Go(func() {
			errs[r] = c.AllReduce(ctx, goccl.HostSlice(got[r]), goccl.HostSlice(got[r]), 2, goccl.Float32, goccl.Sum)
		})
	}
	wg.Wait()
	for r := range comms {
		require.NoError(t, errs[r])
		require.Equal(t, []float32{3, 1}, got[r], "rank %d", r)
	}
}
