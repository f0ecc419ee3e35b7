package algos_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// TestValidateOverflowEdge: the overflow check (multiplications, not divisions) draws
// the line exactly at count x ranks x element size = math.MaxInt, for every element
// size and world sizes that do and do not divide it.
func TestValidateOverflowEdge(t *testing.T) {
	for _, dt := range []transport.DType{transport.Int8, transport.Float16, transport.Float32, transport.Float64} {
		for _, w := range []int{1, 2, 3, 7, 1 << 20, math.MaxInt32} {
			last := math.MaxInt / dt.Size() / w // the largest count whose bytes fit
			for _, tc := range []struct {
				count int
				over  bool
			}{{last, false}, {last + 1, true}, {math.MaxInt, w*dt.Size() > 1}} {
				if tc.count < 0 { // last + 1 past math.MaxInt itself (one byte, one rank)
					continue
				}
				a := algos.Args{Kind: transport.KindAllGather, Count: tc.count, DType: dt}
				err := algos.Validate(&a, 0, w)
				require.Error(t, err)
				if tc.over {
					require.ErrorContains(t, err, "overflows", "%s w=%d count=%d", dt, w, tc.count)
				} else {
					require.NotContains(t, err.Error(), "overflows", "%s w=%d count=%d", dt, w, tc.count)
				}
			}
		}
	}
}

func TestValidateRejects(t *testing.T) {
	buf := make([]byte, 256)
	f32 := transport.Float32
	tests := []struct {
		name        string
		a           algos.Args
		rank, world int
		want        string
	}{
		{"allgather recv short", algos.Args{Kind: transport.KindAllGather, Send: buf[:12], Recv: buf[100:140], Count: 3, DType: f32},
			0, 4, "allgather: recv buffer is 40 bytes, need 48 (count 3 x 4 ranks x 4-byte float32)"},
		{"allreduce send short", algos.Args{Kind: transport.KindAllReduce, Send: buf[:7], Recv: buf[8:16], Count: 2, DType: f32},
			1, 2, "allreduce: send buffer is 7 bytes, need 8 (count 2 x 4-byte float32)"},
		{"reducescatter send short", algos.Args{Kind: transport.KindReduceScatter, Send: buf[:20], Recv: buf[100:104], Count: 1, DType: transport.Float64},
			0, 3, "send buffer is 20 bytes, need 24 (count 1 x 3 ranks x 8-byte float64)"},
		{"root too big", algos.Args{Kind: transport.KindBroadcast, Recv: buf[:4], Count: 1, DType: f32, Root: 5},
			0, 4, "root 5 out of range; valid 0..3 (world of 4 ranks)"},
		{"root negative", algos.Args{Kind: transport.KindGather, Send: buf[:4], Count: 1, DType: f32, Root: -1},
			0, 4, "root -1 out of range"},
		{"dtype", algos.Args{Kind: transport.KindAllReduce, Send: buf, Recv: buf, Count: 1, DType: 77},
			0, 2, "unknown dtype 77 (valid: int8"},
		{"op", algos.Args{Kind: transport.KindReduce, Send: buf, Recv: buf, Count: 1, DType: f32, Op: 9},
			0, 2, "unknown op 9 (valid: sum, prod, max, min, avg)"},
		{"kind", algos.Args{Kind: transport.KindControl}, 0, 2, "control is not a collective"},
		{"count", algos.Args{Kind: transport.KindAllReduce, Count: -1, DType: f32}, 0, 2, "count -1 is negative"},
		{"overflow", algos.Args{Kind: transport.KindAllGather, Count: 1 << 61, DType: transport.Float64}, 0, 2, "overflows"},
		{"chunk", algos.Args{Kind: transport.KindAllReduce, DType: f32, ChunkBytes: -5}, 0, 2, "chunk size -5 bytes is negative"},
		{"rank", algos.Args{Kind: transport.KindBarrier}, 4, 4, "rank 4 outside the world of 4 ranks (valid 0..3)"},
		{"world", algos.Args{Kind: transport.KindBarrier}, 0, 0, "world of 0 ranks"},
		{"partial overlap", algos.Args{Kind: transport.KindAllReduce, Send: buf[0:16], Recv: buf[4:20], Count: 4, DType: f32},
			0, 2, "send and recv overlap at offset -4; send and recv must be the same memory or disjoint"},
		{"allgather wrong alias", algos.Args{Kind: transport.KindAllGather, Send: buf[0:4], Recv: buf[0:16], Count: 1, DType: f32},
			2, 4, "in-place needs send = recv[8:] (rank 2's block)"},
		{"reducescatter wrong alias", algos.Args{Kind: transport.KindReduceScatter, Send: buf[0:16], Recv: buf[0:4], Count: 1, DType: f32},
			1, 4, "in-place needs recv = send[4:] (rank 1's block)"},
		{"sendrecv peer", algos.Args{Kind: transport.KindSendRecv, Send: buf[:4], Recv: buf[4:8], Count: 1, DType: f32, SendPeer: 3, RecvPeer: -1},
			0, 3, "send peer 3 out of range; valid -1 (none) or 0..2"},
		{"sendrecv self", algos.Args{Kind: transport.KindSendRecv, Send: buf[:4], Recv: buf[4:8], Count: 1, DType: f32, SendPeer: 1, RecvPeer: 0},
			1, 3, "rank 1 sends to rank 1 but receives from rank 0"},
		{"sendrecv overlap", algos.Args{Kind: transport.KindSendRecv, Send: buf[:8], Recv: buf[:8], Count: 2, DType: f32, SendPeer: 1, RecvPeer: 1},
			0, 2, "must be disjoint unless the rank sends to itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.a
			err := algos.Validate(&a, tt.rank, tt.world)
			require.ErrorIs(t, err, transport.ErrInvalid)
			require.ErrorContains(t, err, tt.want)
		})
	}
	require.ErrorIs(t, algos.Validate(nil, 0, 1), transport.ErrInvalid)
}

func TestValidateAcceptsAndTrims(t *testing.T) {
	buf := make([]byte, 256)
	f32 := transport.Float32
	tests := []struct {
		name             string
		a                algos.Args
		rank, world      int
		sendLen, recvLen int // after Validate; -1 = nil
	}{
		{"allreduce in-place, long buffers", algos.Args{Kind: transport.KindAllReduce, Send: buf, Recv: buf, Count: 3, DType: f32}, 0, 2, 12, 12},
		{"allgather in-place alias", algos.Args{Kind: transport.KindAllGather, Send: buf[8:], Recv: buf[:16], Count: 1, DType: f32}, 2, 4, 4, 16},
		{"reducescatter in-place alias", algos.Args{Kind: transport.KindReduceScatter, Send: buf[:24], Recv: buf[8:], Count: 2, DType: f32}, 1, 3, 24, 8},
		{"reducescatter rank 0 in-place", algos.Args{Kind: transport.KindReduceScatter, Send: buf[:24], Recv: buf, Count: 2, DType: f32}, 0, 3, 24, 8},
		{"reduce non-root drops recv", algos.Args{Kind: transport.KindReduce, Send: buf[:4], Recv: buf[:1], Count: 1, DType: f32, Root: 1}, 0, 2, 4, -1},
		{"broadcast non-root drops send", algos.Args{Kind: transport.KindBroadcast, Send: buf[:1], Recv: buf[:4], Count: 1, DType: f32}, 1, 2, -1, 4},
		{"gather root alias", algos.Args{Kind: transport.KindGather, Send: buf[4:8], Recv: buf[:12], Count: 1, DType: f32, Root: 1}, 1, 3, 4, 12},
		{"scatter root alias", algos.Args{Kind: transport.KindScatter, Send: buf[:12], Recv: buf[8:], Count: 1, DType: f32, Root: 2}, 2, 3, 12, 4},
		{"scatter non-root", algos.Args{Kind: transport.KindScatter, Recv: buf[:4], Count: 1, DType: f32}, 1, 3, -1, 4},
		{"sendrecv recv only", algos.Args{Kind: transport.KindSendRecv, Recv: buf[:4], Count: 1, DType: f32, SendPeer: -1, RecvPeer: 0}, 1, 2, -1, 4},
		{"sendrecv self in-place", algos.Args{Kind: transport.KindSendRecv, Send: buf[:4], Recv: buf[:4], Count: 1, DType: f32, SendPeer: 1, RecvPeer: 1}, 1, 2, 4, 4},
		{"barrier ignores the rest", algos.Args{Kind: transport.KindBarrier, DType: 99, Count: -3}, 0, 2, -1, -1},
		{"count 0 nil buffers", algos.Args{Kind: transport.KindAllToAll, DType: f32}, 0, 5, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.a
			require.NoError(t, algos.Validate(&a, tt.rank, tt.world))
			check := func(b []byte, want int, what string) {
				if want < 0 {
					require.Nil(t, b, what)
				} else {
					require.Len(t, b, want, what)
				}
			}
			check(a.Send, tt.sendLen, "send")
			check(a.Recv, tt.recvLen, "recv")
			require.NoError(t, algos.Validate(&a, tt.rank, tt.world), "Validate is idempotent")
		})
	}
}

func TestBytes(t *testing.T) {
	require.Equal(t, 12, algos.Bytes(transport.KindAllReduce, 3, transport.Float32, 4))
	require.Equal(t, 48, algos.Bytes(transport.KindAllGather, 3, transport.Float32, 4))
	require.Equal(t, 48, algos.Bytes(transport.KindReduceScatter, 3, transport.Float32, 4))
	require.Equal(t, 6, algos.Bytes(transport.KindSendRecv, 3, transport.BFloat16, 4))
	require.Equal(t, 0, algos.Bytes(transport.KindBarrier, 3, transport.Float32, 4))
}

// Apart is the overlap test of the communicator's small AllReduce (Validate's rule for
// AllReduce, with SameMemory): no shared byte, whatever the order of the two slices.
func TestApart(t *testing.T) {
	b := make([]byte, 16)
	for _, tc := range []struct {
		name string
		x, y []byte
		want bool
	}{
		{"disjoint", b[:8], b[8:], true},
		{"disjoint, reversed", b[8:], b[:8], true},
		{"same", b[:8], b[:8], false},
		{"one byte shared", b[:9], b[8:], false},
		{"one byte shared, reversed", b[8:], b[:9], false},
		{"inside", b[2:4], b[:8], false},
		{"empty", b[:0], b[:8], true},
		{"separate arrays", make([]byte, 4), make([]byte, 4), true},
	} {
		require.Equal(t, tc.want, algos.Apart(tc.x, tc.y), tc.name)
	}
}

// TestFitAgreesWithValidate: Fit takes exactly the calls Validate takes, and cuts the
// buffers as Validate does, over every collective Fit is for, 1-4 ranks, every rank,
// roots in and out of range, valid and invalid dtypes and ops, and buffers that are
// apart, short by a byte, in NCCL's in-place forms at every offset, or overlapping
// otherwise.
func TestFitAgreesWithValidate(t *testing.T) {
	mem := make([]byte, 1024)
	checked, taken := 0, 0
	for _, k := range transport.Kinds {
		if k == transport.KindBarrier || k == transport.KindSendRecv {
			_, _, ok := algos.Fit(k, 1, transport.Float32, transport.Sum, 2, 0, 0, mem[:8], mem[8:16])
			require.False(t, ok, "%s", k)
			continue
		}
		for _, w := range []int{1, 2, 3, 4} {
			for rank := range w {
				for _, root := range []int{-1, 0, w - 1, w} {
					for _, dt := range []transport.DType{transport.Float32, transport.Int8, transport.DType(200)} {
						for _, op := range []transport.Op{transport.Sum, transport.Op(200)} {
							for _, count := range []int{0, 1, 3} {
								n := count * max(dt.Size(), 1)
								big := w * n
								// Send and Recv: apart (and a byte short), the same start, and
								// each offset of one inside the other.
								type pair struct{ s, r []byte }
								cases := []pair{{mem[:big], mem[512 : 512+big]}, {mem[:max(big-1, 0)], mem[512 : 512+big]},
									{mem[:big], mem[512 : 512+max(big-1, 0)]}, {mem[:big], mem[:big]}}
								for off := 1; off <= big; off++ {
									cases = append(cases, pair{mem[off : off+big], mem[:big]}, pair{mem[:big], mem[off : off+big]})
								}
								for _, c := range cases {
									a := algos.Args{Kind: k, Send: c.s, Recv: c.r, Count: count, DType: dt, Op: op, Root: root,
										SendPeer: -1, RecvPeer: -1}
									err := algos.Validate(&a, rank, w)
									s, r, ok := algos.Fit(k, count, dt, op, w, rank, root, c.s, c.r)
									require.Equal(t, err == nil, ok, "%s w=%d rank=%d root=%d %s %s count=%d: %v", k, w, rank, root, dt, op, count, err)
									checked++
									if ok {
										taken++
										require.Equal(t, len(a.Send), len(s), "%s: send", k)
										require.Equal(t, len(a.Recv), len(r), "%s: recv", k)
										require.Equal(t, a.Send == nil, s == nil, "%s: send", k)
										require.Equal(t, a.Recv == nil, r == nil, "%s: recv", k)
										require.True(t, len(s) == 0 || &s[0] == &a.Send[0], "%s: send", k)
										require.True(t, len(r) == 0 || &r[0] == &a.Recv[0], "%s: recv", k)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	require.Positive(t, taken)
	require.Less(t, taken, checked)
}
