//go:build linux && cgo

package nccl

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/goccl/goccl/transport"
)

var nvmlMu sync.Mutex // nvml.Init/Shutdown are refcounted, but discovery runs one at a time

// GPUs lists the NVIDIA GPUs through NVML. Without a driver it returns an error
// wrapping transport.ErrNotSupported ("no NVIDIA driver"). NVML is initialized first
// and nothing else is called unless that succeeds: any NVML call before a successful
// nvml.Init ends the process.
func GPUs() ([]GPU, error) {
	nvmlMu.Lock()
	defer nvmlMu.Unlock()
	gpus, _, _, err := discover(nvml.New())
	return gpus, err
}

// Driver returns the NVIDIA driver version ("550.54.15") and the CUDA version it
// supports (12040), through NVML.
func Driver() (string, int, error) {
	nvmlMu.Lock()
	defer nvmlMu.Unlock()
	_, drv, cu, err := discover(nvml.New())
	return drv, cu, err
}

func discover(lib nvml.Interface) ([]GPU, string, int, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, "", 0, fmt.Errorf("nccl: %w: no NVIDIA driver: nvml.Init: %v", transport.ErrNotSupported, ret)
	}
	defer lib.Shutdown()
	drv, _ := lib.SystemGetDriverVersion()
	cu, _ := lib.SystemGetCudaDriverVersion()
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, drv, cu, fmt.Errorf("nccl: nvml.DeviceGetCount: %v", ret)
	}
	gpus := make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, drv, cu, fmt.Errorf("nccl: nvml.DeviceGetHandleByIndex(%d): %v", i, ret)
		}
		g := GPU{Index: i}
		g.Name, _ = d.GetName()
		g.UUID, _ = d.GetUUID()
		if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			g.Domain, g.Bus, g.Device = pci.Domain, pci.Bus, pci.Device
			g.PCIBusID = cString(pci.BusId[:])
			if g.PCIBusID == "" {
				g.PCIBusID = fmt.Sprintf("%08x:%02x:%02x.0", pci.Domain, pci.Bus, pci.Device)
			}
		}
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryTotal, g.MemoryFree = m.Total, m.Free
		}
		g.ComputeMajor, g.ComputeMinor, _ = d.GetCudaComputeCapability()
		for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
			st, ret := d.GetNvLinkState(l)
			if ret != nvml.SUCCESS {
				continue // link absent (ERROR_NOT_SUPPORTED / INVALID_ARGUMENT past the last link)
			}
			lk := NVLink{Link: l, Active: st == nvml.FEATURE_ENABLED}
			if lk.Active {
				if rp, ret := d.GetNvLinkRemotePciInfo(l); ret == nvml.SUCCESS {
					lk.RemoteID = cString(rp.BusId[:])
				}
			}
			g.NVLinks = append(g.NVLinks, lk)
		}
		gpus = append(gpus, g)
	}
	return gpus, drv, cu, nil
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
