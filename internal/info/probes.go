package info

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/Mellanox/rdmamap"

	// The root package registers every built-in transport, so probeTransports sees them.
	_ "github.com/goccl/goccl"
	"github.com/goccl/goccl/nccl"
	"github.com/goccl/goccl/transport"
)

// rdmaDevices lists RDMA devices through rdmamap (sysfs /sys/class/infiniband).
// ADAPT: switch to package rdma's discovery function once it exports one.
func rdmaDevices() (RDMA, error) {
	names := rdmamap.GetRdmaDeviceList()
	if len(names) == 0 {
		return RDMA{}, errors.New("no RDMA devices in /sys/class/infiniband")
	}
	var r RDMA
	for _, n := range names {
		r.Devices = append(r.Devices, RDMADevice{Name: n, Ports: rdmamap.GetPorts(n), CharDevices: rdmamap.GetRdmaCharDevices(n)})
	}
	return r, nil
}

// rdmaNetdevs maps network interface names to their RDMA device.
func rdmaNetdevs(r RDMA) map[string]string {
	m := map[string]string{}
	if len(r.Devices) == 0 {
		return m
	}
	for _, ifname := range netdevNames() {
		if d, err := rdmamap.GetRdmaDeviceForNetdevice(ifname); err == nil && d != "" {
			m[ifname] = d
		}
	}
	return m
}

// gpuDevices lists NVIDIA GPUs through the nccl package's NVML discovery, which calls
// nothing else in NVML unless nvml.Init succeeded.
func gpuDevices() (GPUs, error) {
	gpus, err := nccl.GPUs()
	if err != nil {
		if errors.Is(err, transport.ErrNotSupported) && !strings.Contains(err.Error(), "no NVIDIA driver") {
			return GPUs{}, fmt.Errorf("no NVIDIA driver (%w)", err)
		}
		return GPUs{}, err
	}
	var g GPUs
	g.Driver, g.CUDA, _ = nccl.Driver()
	for _, d := range gpus {
		g.Devices = append(g.Devices, GPU{Index: d.Index, Name: d.Name, PCI: d.DeviceString(), MemBytes: d.MemoryTotal, NVLinks: d.ActiveNVLinks()})
	}
	return g, nil
}

func netdevNames() []string {
	ifs, _ := net.Interfaces()
	names := make([]string, len(ifs))
	for i, f := range ifs {
		names[i] = f.Name
	}
	return names
}
