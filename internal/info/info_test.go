package info

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// fakeRoots builds a small /sys and /proc: two NUMA nodes, one NIC with a speed.
func fakeRoots(t *testing.T) (sys, proc string) {
	sys, proc = t.TempDir(), t.TempDir()
	write(t, filepath.Join(sys, "devices/system/node/node0/cpulist"), "0-15,32-47\n")
	write(t, filepath.Join(sys, "devices/system/node/node0/meminfo"), "Node 0 MemTotal:       65536 kB\nNode 0 MemFree: 1 kB\n")
	write(t, filepath.Join(sys, "devices/system/node/node1/cpulist"), "16-31\n")
	write(t, filepath.Join(sys, "devices/system/node/node1/meminfo"), "Node 1 MemTotal:       1048576 kB\n")
	write(t, filepath.Join(sys, "devices/system/node/possible"), "0-1\n")
	write(t, filepath.Join(sys, "class/net/lo/speed"), "-1\n")
	write(t, filepath.Join(proc, "cpuinfo"), "processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nmodel name\t: Test CPU 9000\n")
	write(t, filepath.Join(proc, "meminfo"), "MemTotal:       24576000 kB\nMemFree: 3 kB\n")
	damon := filepath.Join(sys, "kernel/mm/damon/admin/kdamonds")
	write(t, filepath.Join(damon, "nr_kdamonds"), "2\n")
	write(t, filepath.Join(damon, "2/state"), "on\n")
	write(t, filepath.Join(damon, "2/contexts/0/operations"), "paddr\n")
	write(t, filepath.Join(damon, "2/contexts/0/schemes/0/action"), "pageout\n")
	write(t, filepath.Join(damon, "2/contexts/0/schemes/1/action"), "lru_prio\n")
	write(t, filepath.Join(damon, "10/state"), "off\n")
	write(t, filepath.Join(damon, "10/contexts/0/operations"), "vaddr\n")
	return sys, proc
}

func TestGatherFromFakeRoots(t *testing.T) {
	sys, proc := fakeRoots(t)
	r := Gather(context.Background(), Options{
		SysRoot: sys, ProcRoot: proc, SkipTransports: true,
		RDMADevices: func() (RDMA, error) { return RDMA{}, errors.New("no RDMA devices in /sys/class/infiniband") },
		GPUDevices:  func() (GPUs, error) { return GPUs{}, errors.New("no NVIDIA driver (test)") },
	})
	require.Equal(t, "Test CPU 9000", r.CPU.Model)
	require.Equal(t, []string{"sse2", "avx", "avx2", "fma"}, r.CPU.Flags)
	require.Equal(t, uint64(24576000*1024), r.MemBytes)
	require.Equal(t, []NUMANode{{ID: 0, CPUs: "0-15,32-47", MemBytes: 65536 * 1024}, {ID: 1, CPUs: "16-31", MemBytes: 1 << 30}}, r.NUMA)
	require.Equal(t, "no RDMA devices in /sys/class/infiniband", r.RDMA.Note)
	require.Equal(t, "no NVIDIA driver (test)", r.GPUs.Note)
	require.Equal(t, []Kdamond{{ID: 2, State: "on", Operations: "paddr", Schemes: []string{"pageout", "lru_prio"}},
		{ID: 10, State: "off", Operations: "vaddr"}}, r.DAMON, "in the order of their numbers, not of their names")
	var lo *Interface
	for i := range r.Interfaces {
		if r.Interfaces[i].Loopback {
			lo = &r.Interfaces[i]
		}
	}
	require.NotNil(t, lo, "every Linux host has a loopback interface")
	require.Equal(t, -1, lo.SpeedMbps)
	require.Contains(t, lo.Addrs, "127.0.0.1/8")

	var text bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	for _, want := range []string{"cpus:", "Test CPU 9000 (sse2 avx avx2 fma)", "numa:", "node1", "cpus 16-31", "1.0 GiB",
		"rdma:", "none (no RDMA devices", "gpus:", "none (no NVIDIA driver (test))", "speed unknown",
		"kdamond 2 on (paddr, schemes pageout,lru_prio)  (takes a core", "kdamond 10 off (vaddr)\n"} {
		require.Contains(t, text.String(), want)
	}
	var js bytes.Buffer
	require.NoError(t, r.WriteJSON(&js))
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Equal(t, r.NUMA, back.NUMA)
	require.Equal(t, r.DAMON, back.DAMON)

	// A kernel without DAMON, or with no monitor set up: none, and the text says so.
	require.NoError(t, os.RemoveAll(filepath.Join(sys, "kernel")))
	r = Gather(context.Background(), Options{SysRoot: sys, ProcRoot: proc, SkipTransports: true,
		RDMADevices: func() (RDMA, error) { return RDMA{}, nil }, GPUDevices: func() (GPUs, error) { return GPUs{}, nil }})
	require.Empty(t, r.DAMON)
	text.Reset()
	require.NoError(t, r.WriteText(&text))
	require.Regexp(t, `damon:\s+no memory monitor running`, text.String())
}

func TestLinkSpeed(t *testing.T) {
	sys := t.TempDir()
	write(t, filepath.Join(sys, "class/net/eth0/speed"), "25000\n")
	write(t, filepath.Join(sys, "class/net/veth0/speed"), "garbage")
	require.Equal(t, 25000, linkSpeed(sys, "eth0"))
	require.Equal(t, -1, linkSpeed(sys, "veth0"))
	require.Equal(t, -1, linkSpeed(sys, "missing"))
}

func TestProbeTransports(t *testing.T) {
	st := probeTransports(context.Background(), "testhost")
	require.NotEmpty(t, st)
	names := map[string]TransportStatus{}
	for _, s := range st {
		names[s.Name] = s
		if !s.OK {
			require.NotEmpty(t, s.Reason, s.Name)
		}
	}
	// inmem and tcp need nothing but the Go runtime and a loopback interface.
	require.True(t, names["inmem"].OK, "%+v", names["inmem"])
	require.True(t, names["tcp"].OK, "%+v", names["tcp"])
}

func TestRealHost(t *testing.T) {
	r := Gather(context.Background(), Options{SkipTransports: true})
	require.NotEmpty(t, r.Host.Name)
	require.Positive(t, r.CPU.Logical)
	require.Positive(t, r.MemBytes)
	// No GPU on this machine: the report must say why rather than fail.
	if len(r.GPUs.Devices) == 0 {
		require.NotEmpty(t, r.GPUs.Note)
	}
}
