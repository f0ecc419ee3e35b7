package rdma

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/Mellanox/rdmamap"
	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

// TestDiscoverHost: on a host without /sys/class/infiniband (this CI machine) the list
// is empty and not an error; where devices exist, each has a name and numbered ports.
func TestDiscoverHost(t *testing.T) {
	devs, err := Discover()
	require.NoError(t, err)
	require.NotNil(t, devs)
	if _, statErr := os.Stat(rdmamap.RdmaClassDir); os.IsNotExist(statErr) {
		require.Empty(t, devs)
		err := Probe()
		require.ErrorIs(t, err, transport.ErrNotSupported)
		t.Logf("probe here: %v", err)
		return
	}
	for _, d := range devs {
		require.NotEmpty(t, d.Name)
		for _, p := range d.Ports {
			require.Positive(t, p.Num)
		}
	}
}

func write(t *testing.T, path, v string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(v+"\n"), 0o644))
}

// TestDiscoverTree reads a sysfs-shaped tree: the same files a ConnectX port has.
func TestDiscoverTree(t *testing.T) {
	root := t.TempDir()
	pci := filepath.Join(root, "devices", "pci0000:00", "0000:00:02.0", "0000:05:00.0")
	require.NoError(t, os.MkdirAll(pci, 0o755))
	ib := filepath.Join(root, "class")
	for _, d := range []string{"mlx5_1", "mlx5_0"} {
		write(t, filepath.Join(ib, d, "node_guid"), "b859:9f03:00d4:4e2"+d[len(d)-1:])
		require.NoError(t, os.Symlink(pci, filepath.Join(ib, d, "device")))
	}
	port := filepath.Join(ib, "mlx5_0", "ports", "1")
	write(t, filepath.Join(port, "state"), "4: ACTIVE")
	write(t, filepath.Join(port, "phys_state"), "5: LinkUp")
	write(t, filepath.Join(port, "link_layer"), "Ethernet")
	write(t, filepath.Join(port, "rate"), "100 Gb/sec (4X EDR)")
	port2 := filepath.Join(ib, "mlx5_0", "ports", "2")
	write(t, filepath.Join(port2, "state"), "1: DOWN")
	write(t, filepath.Join(port2, "link_layer"), "InfiniBand")
	list := func(dir string) []string {
		es, _ := os.ReadDir(dir)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	fs := sysfs{
		root:    ib,
		devices: func() []string { return list(ib) },
		ports:   func(d string) []string { return list(filepath.Join(ib, d, "ports")) },
		counters: func(d string, p int) ([]rdmamap.RdmaStatEntry, []rdmamap.RdmaStatEntry) {
			return []rdmamap.RdmaStatEntry{{Name: "port_xmit_data", Value: uint64(100 * p)}}, nil
		},
		netdevs: func() map[string][]string { return map[string][]string{"mlx5_0": {"enp5s0f0"}} },
	}
	devs := discover(fs)
	require.Len(t, devs, 2)
	d := devs[0]
	require.Equal(t, "mlx5_0", d.Name)
	require.Equal(t, "b859:9f03:00d4:4e20", d.NodeGUID)
	require.Equal(t, "0000:05:00.0", d.PCI)
	require.Equal(t, []string{"enp5s0f0"}, d.Netdevs)
	require.Len(t, d.Ports, 2)
	require.Equal(t, Port{Num: 1, State: "ACTIVE", PhysState: "LinkUp", LinkLayer: "Ethernet", Rate: "100 Gb/sec (4X EDR)",
		Counters: map[string]uint64{"port_xmit_data": 100}}, d.Ports[0])
	require.True(t, d.Ports[0].Active())
	require.False(t, d.Ports[1].Active())
	require.Equal(t, "InfiniBand", d.Ports[1].LinkLayer)
	require.Equal(t, uint64(200), d.Ports[1].Counters["port_xmit_data"])
	require.Equal(t, "mlx5_1", devs[1].Name)
	require.Empty(t, devs[1].Ports)
}
