//go:build linux && cgo

package abicheck

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLayoutMatchesHeaders checks abi.h against rdma-core's verbs.h, field by field.
func TestLayoutMatchesHeaders(t *testing.T) {
	have, fields := Fields()
	if !have {
		t.Skip("<infiniband/verbs.h> not found: install libibverbs-dev (apt-get install -y libibverbs-dev) to check the verbs ABI")
	}
	require.Greater(t, len(fields), 80)
	for _, f := range fields {
		require.Equal(t, f.Real, f.Ours, "%s: verbs.h says %d, abi.h says %d", f.Name, f.Real, f.Ours)
	}
	enums := Enums()
	require.NotEmpty(t, enums)
	for i, e := range enums {
		require.Equal(t, e[1], e[0], "constant %d: verbs.h %#x, abi.h %#x", i, e[1], e[0])
	}
}

// TestKnownLayout pins the numbers in reference/abi.md §6.3 (x86-64), so a change of
// abi.h that also moved the header's view would still be noticed.
func TestKnownLayout(t *testing.T) {
	_, fields := Fields()
	byName := map[string]int{}
	for _, f := range fields {
		byName[f.Name] = f.Ours
	}
	for name, want := range map[string]int{
		"sizeof ibv_send_wr": 128, "sizeof ibv_wc": 48, "sizeof ibv_qp_attr": 144, "sizeof ibv_port_attr": 52,
		"sizeof ibv_recv_wr": 32, "sizeof ibv_sge": 16, "sizeof ibv_mr": 48, "ibv_context.ops": 8,
		"ibv_context_ops.poll_cq": 88, "ibv_context_ops.post_send": 200, "ibv_context_ops.post_recv": 208,
		"ibv_send_wr.imm_data": 36, "ibv_send_wr.wr.rdma.remote_addr": 40, "ibv_send_wr.wr.rdma.rkey": 48,
		"ibv_wc.imm_data": 24, "ibv_qp.qp_num": 52, "ibv_qp_attr.ah_attr": 56, "ibv_qp_attr.timeout": 130,
		"ibv_port_attr.lid": 34, "ibv_port_attr.link_layer": 46, "ibv_mr.lkey": 36, "ibv_mr.rkey": 40,
	} {
		got, ok := byName[name]
		require.True(t, ok, "%s is not checked", name)
		require.Equal(t, want, got, name)
	}
}
