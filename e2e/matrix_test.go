package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkMatrix asserts that every rank of a matrix job ran every call and got the
// reference result, and that each link used the transport want says (by peer).
func checkMatrix(t *testing.T, res result, n int, want func(rank, peer int) string) {
	t.Helper()
	require.Equal(t, 0, res.code, "the job failed\n%s", res)
	for _, line := range strings.Split(res.stdout, "\n") {
		require.NotContains(t, line, "MATRIX-WRONG", "wrong result\n%s", res)
		require.NotContains(t, line, "MATRIX-ERROR", "collective failed\n%s", res)
	}
	sums := records(res.stdout, "MATRIX")
	require.Len(t, sums, n, "not every rank reported\n%s", res)
	calls := sums[0].int("calls")
	require.Positive(t, calls)
	for r, s := range sums {
		require.Equal(t, "0", s.kv["bad"], "rank %d: %s", r, s.line)
		require.Equal(t, calls, s.int("calls"), "rank %d ran a different plan", r)
	}
	links := records(res.stdout, "LINKS")
	require.Len(t, links, n, "not every rank reported its links\n%s", res)
	for r, l := range links {
		for p := range n {
			exp := "self"
			if p != r {
				exp = want(r, p)
			}
			require.Contains(t, l.line, fmt.Sprintf(" %d:%s", p, exp), "rank %d's link to rank %d\n%s", r, p, l.line)
		}
	}
}

// TestMatrix runs every collective x dtype x op x count between real processes, for
// each algorithm, world size and transport. Each job runs the whole plan (about 340
// calls) in one launch, so the cost is the collectives, not process start-up.
func TestMatrix(t *testing.T) {
	worlds := []int{2, 3, 4}
	algos := []string{"ring", "tree", "naive"}
	if testing.Short() {
		worlds = []int{3}
	}
	for _, tr := range transports {
		for _, w := range worlds {
			for _, algo := range algos {
				t.Run(fmt.Sprintf("%s/W%d/%s", tr, w, algo), func(t *testing.T) {
					large := "allreduce"
					if w == 3 {
						// One world size gets the large case of every collective; the
						// others keep to AllReduce so the package stays within its budget.
						large = "allreduce,reduce,broadcast,allgather,reducescatter,gather,scatter,alltoall,sendrecv"
					}
					res := job{n: w, env: []string{"GOCCL_TRANSPORT=" + tr, "GOCCL_ALGO=" + algo, "GOCCL_TIMEOUT=60s"},
						args: []string{"-mode", "matrix", "-large", large}}.run(t)
					checkMatrix(t, res, w, func(int, int) string { return tr })
				})
			}
		}
	}
}

// TestMatrixShared runs the matrix with every buffer in memory from AllocShared over shm,
// so that every collective but Reduce, Gather, Barrier and SendRecv reads the peers'
// buffers in place (shm.direct_min 0: at every size), between real processes; those run
// as usual on the same memory. Every rank must report direct calls.
func TestMatrixShared(t *testing.T) {
	worlds := []int{2, 3, 4}
	if testing.Short() {
		worlds = []int{3}
	}
	for _, w := range worlds {
		t.Run(fmt.Sprintf("W%d", w), func(t *testing.T) {
			res := job{n: w, env: []string{"GOCCL_TRANSPORT=shm", "GOCCL_SHM_DIRECT_MIN=0", "GOCCL_TIMEOUT=60s"},
				args: []string{"-mode", "matrix", "-shared", "-large", "allreduce,allgather,reducescatter,broadcast"}}.run(t)
			checkMatrix(t, res, w, func(int, int) string { return "shm" })
			for r, s := range records(res.stdout, "MATRIX") {
				require.Positive(t, s.int("direct"), "rank %d ran no collective in place: %s", r, s.line)
			}
		})
	}
}

// TestMatrixStaged runs the matrix over shm with algorithm "staged" between real
// processes: every AllReduce passes through the staging area (4 KiB parts: windows of
// 2 KiB, so the large case takes thousands of windows and small ones end mid-vector), the
// other collectives take the ring's fallback chain. Every rank must report staged calls.
func TestMatrixStaged(t *testing.T) {
	worlds := []int{2, 3, 4}
	if testing.Short() {
		worlds = []int{3}
	}
	for _, w := range worlds {
		t.Run(fmt.Sprintf("W%d", w), func(t *testing.T) {
			res := job{n: w, env: []string{"GOCCL_TRANSPORT=shm", "GOCCL_ALGO=staged", "GOCCL_SHM_STAGING_BYTES=4K", "GOCCL_TIMEOUT=60s"},
				args: []string{"-mode", "matrix", "-large", "allreduce"}}.run(t)
			checkMatrix(t, res, w, func(int, int) string { return "shm" })
			for r, s := range records(res.stdout, "MATRIX") {
				require.Positive(t, s.int("staged"), "rank %d ran no AllReduce through the staging area: %s", r, s.line)
			}
		})
	}
}

// TestMatrixMixed runs the matrix on one communicator whose links mix shm and tcp: two
// groups of ranks pose as two hosts, so pairs inside a group use shm and pairs across
// use tcp (the first transport of "shm,tcp" that can connect).
func TestMatrixMixed(t *testing.T) {
	const w = 4
	hosts := []string{"hostA", "hostA", "hostB", "hostB"}
	// tcp refuses loopback between different host identities (loopback does not cross
	// hosts), so the tcp links need a routable address of this machine.
	ip := routableIP(t)
	for _, algo := range []string{"auto", "ring"} {
		t.Run(algo, func(t *testing.T) {
			res := job{n: w, env: []string{"GOCCL_TRANSPORT=shm,tcp", "GOCCL_ALGO=" + algo, "GOCCL_TIMEOUT=60s",
				"GOCCL_TCP_ADDR=" + net.JoinHostPort(ip, "0")},
				launcher: []string{"--host-id", strings.Join(hosts, ",")},
				args:     []string{"-mode", "matrix", "-large", "allreduce,allgather,reducescatter"}}.run(t)
			checkMatrix(t, res, w, func(r, p int) string {
				if hosts[r] == hosts[p] {
					return "shm"
				}
				return "tcp"
			})
		})
	}
}

// TestMatrixCatchesCorruption is the control: with one output byte flipped per call the
// same check must report wrong results, so a passing matrix means something.
func TestMatrixCatchesCorruption(t *testing.T) {
	res := job{n: 2, env: []string{"GOCCL_TRANSPORT=tcp", "GOCCL_ALGO=ring"},
		args: []string{"-mode", "matrix", "-large", "", "-corrupt"}}.run(t)
	require.NotEqual(t, 0, res.code, "corrupted results passed the check\n%s", res)
	require.Contains(t, res.stdout, "MATRIX-WRONG")
	for r, s := range records(res.stdout, "MATRIX") {
		require.NotEqual(t, "0", s.kv["bad"], "rank %d found nothing wrong", r)
	}
}

// routableIP returns a non-loopback address of this machine, or skips the test.
func routableIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address: tcp cannot link ranks that pose as different hosts")
	return ""
}

// TestP2P runs AllToAllV and BatchSendRecv between real processes over each transport,
// at 2 to 4 ranks: uneven blocks from 0 elements to a few MiB, in place and apart,
// and random batches in which every rank orders its ops differently.
func TestP2P(t *testing.T) {
	worlds := []int{2, 3, 4}
	if testing.Short() {
		worlds = []int{3}
	}
	for _, tr := range transports {
		for _, w := range worlds {
			t.Run(fmt.Sprintf("%s/W%d", tr, w), func(t *testing.T) {
				res := job{n: w, env: []string{"GOCCL_TRANSPORT=" + tr, "GOCCL_TIMEOUT=60s"}, args: []string{"-mode", "p2p"}}.run(t)
				require.Equal(t, 0, res.code, "the job failed\n%s", res)
				sums := records(res.stdout, "P2P")
				require.Len(t, sums, w, "not every rank reported\n%s", res)
				for r, s := range sums {
					require.Equal(t, "0", s.kv["bad"], "rank %d: %s", r, s.line)
					require.Equal(t, 20, s.int("calls"), "rank %d: %s", r, s.line)
				}
			})
		}
	}
}
