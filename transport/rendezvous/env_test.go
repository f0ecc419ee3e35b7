package rendezvous_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

func TestDiscoverEnv(t *testing.T) {
	unset := rendezvous.Launch{Rank: -1, World: -1, LocalRank: -1, LocalWorld: -1}
	with := func(l rendezvous.Launch, f func(*rendezvous.Launch)) rendezvous.Launch { f(&l); return l }
	for _, tc := range []struct {
		name string
		env  map[string]string
		want rendezvous.Launch
		bad  string // the variable the error must name
	}{
		{"nothing", nil, unset, ""},
		{"goccl", map[string]string{"GOCCL_RANK": "2", "GOCCL_WORLD_SIZE": "4", "GOCCL_LOCAL_RANK": "0", "GOCCL_LOCAL_WORLD_SIZE": "2", "GOCCL_STORE": "10.0.0.1:29500"},
			rendezvous.Launch{Rank: 2, World: 4, LocalRank: 0, LocalWorld: 2, StoreAddr: "10.0.0.1:29500", Source: "goccl"}, ""},
		{"torchrun", map[string]string{"RANK": "1", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "node0", "MASTER_PORT": "29500"},
			rendezvous.Launch{Rank: 1, World: 8, LocalRank: 1, LocalWorld: 4, StoreAddr: "node0:29500", Source: "torchrun"}, ""},
		{"torchrun ipv6", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "fe80::1", "MASTER_PORT": "1"},
			with(unset, func(l *rendezvous.Launch) { l.Rank, l.World, l.StoreAddr, l.Source = 0, 2, "[fe80::1]:1", "torchrun" }), ""},
		{"ompi", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "3"},
			rendezvous.Launch{Rank: 3, World: 5, LocalRank: 1, LocalWorld: 3, Source: "ompi"}, ""},
		{"slurm", map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "7", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "4(x1),3"},
			rendezvous.Launch{Rank: 5, World: 7, LocalRank: 1, LocalWorld: 4, Source: "slurm"}, ""},
		{"pmi", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "1"},
			with(unset, func(l *rendezvous.Launch) { l.Rank, l.World, l.Source = 0, 1, "pmi" }), ""},
		{"precedence goccl over all", map[string]string{"GOCCL_RANK": "1", "GOCCL_WORLD_SIZE": "2", "RANK": "7", "WORLD_SIZE": "9", "SLURM_PROCID": "3", "SLURM_NTASKS": "4"},
			with(unset, func(l *rendezvous.Launch) { l.Rank, l.World, l.Source = 1, 2, "goccl" }), ""},
		{"precedence torchrun over ompi", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "3"},
			with(unset, func(l *rendezvous.Launch) { l.Rank, l.World, l.Source = 1, 2, "torchrun" }), ""},
		{"precedence ompi over slurm", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "3", "SLURM_PROCID": "2", "SLURM_NTASKS": "3", "PMI_RANK": "1", "PMI_SIZE": "3"},
			with(unset, func(l *rendezvous.Launch) { l.Rank, l.World, l.Source = 0, 3, "ompi" }), ""},
		{"goccl store wins", map[string]string{"GOCCL_STORE": "file:/shared/rdzv", "MASTER_ADDR": "x", "MASTER_PORT": "1"},
			with(unset, func(l *rendezvous.Launch) { l.StoreAddr = "file:/shared/rdzv" }), ""},
		{"tcp scheme", map[string]string{"GOCCL_STORE": "tcp://h:2"}, with(unset, func(l *rendezvous.Launch) { l.StoreAddr = "h:2" }), ""},
		{"rank not a number", map[string]string{"RANK": "one", "WORLD_SIZE": "2"}, unset, "RANK"},
		{"rank negative", map[string]string{"GOCCL_RANK": "-1", "GOCCL_WORLD_SIZE": "2"}, unset, "GOCCL_RANK"},
		{"rank too big", map[string]string{"PMI_RANK": "2", "PMI_SIZE": "2"}, unset, "PMI_RANK"},
		{"world zero", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "0"}, unset, "SLURM_NTASKS"},
		{"world missing", map[string]string{"OMPI_COMM_WORLD_RANK": "0"}, unset, "OMPI_COMM_WORLD_SIZE"},
		{"rank missing", map[string]string{"WORLD_SIZE": "4"}, unset, "RANK"},
		{"local rank out of range", map[string]string{"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, unset, "LOCAL_RANK"},
		{"local world too big", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "3"}, unset, "LOCAL_WORLD_SIZE"},
		{"slurm tasks garbage", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "(x2)"}, unset, "SLURM_NTASKS_PER_NODE"},
		{"port missing", map[string]string{"MASTER_ADDR": "h"}, unset, "MASTER_PORT"},
		{"addr missing", map[string]string{"MASTER_PORT": "29500"}, unset, "MASTER_ADDR"},
		{"port out of range", map[string]string{"MASTER_ADDR": "h", "MASTER_PORT": "70000"}, unset, "MASTER_PORT"},
		{"store not host:port", map[string]string{"GOCCL_STORE": "just-a-host"}, unset, "GOCCL_STORE"},
		{"store bad port", map[string]string{"GOCCL_STORE": "h:0"}, unset, "GOCCL_STORE"},
		{"store empty file", map[string]string{"GOCCL_STORE": "file:"}, unset, "GOCCL_STORE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rendezvous.DiscoverEnv(func(k string) string { return tc.env[k] })
			if tc.bad != "" {
				require.ErrorIs(t, err, transport.ErrInvalid)
				require.Contains(t, err.Error(), tc.bad)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
