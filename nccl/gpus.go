package nccl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goccl/goccl/nccl/cuda"
)

// GPU is what NVML reports about one NVIDIA GPU.
type GPU struct {
	Index        int    // NVML index (may differ from the CUDA ordinal; match by PCIBusID)
	Name         string // "NVIDIA H200"
	UUID         string
	PCIBusID     string // as NVML prints it ("00000000:18:00.0")
	Domain       uint32
	Bus          uint32
	Device       uint32
	MemoryTotal  uint64 // bytes
	MemoryFree   uint64
	ComputeMajor int
	ComputeMinor int
	NVLinks      []NVLink // links NVML reports, active or not
}

// NVLink is one NVLink of a GPU.
type NVLink struct {
	Link     int
	Active   bool
	RemoteID string // PCI bus id of the other end, when active and known
}

// ActiveNVLinks counts the active links.
func (g GPU) ActiveNVLinks() int {
	n := 0
	for _, l := range g.NVLinks {
		if l.Active {
			n++
		}
	}
	return n
}

// DeviceString is nccl-tests' device column: "[0000:18:00] NVIDIA H200".
func (g GPU) DeviceString() string { return FormatDevice(g.Domain, g.Bus, g.Device, g.Name) }

// FormatDevice formats a PCI address and name the way nccl-tests' "Using devices" lines
// do ("[%04x:%02x:%02x] %s").
func FormatDevice(domain, bus, device uint32, name string) string {
	return fmt.Sprintf("[%04x:%02x:%02x] %s", domain, bus, device, name)
}

// ParseBusID splits a PCI bus id as CUDA ("0000:18:00.0") or NVML ("00000000:18:00.0")
// prints it.
func ParseBusID(s string) (domain, bus, device uint32, err error) {
	s = strings.TrimRight(strings.TrimSpace(s), "\x00")
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("nccl: PCI bus id %q: want domain:bus:device.function", s)
	}
	devfn, _, _ := strings.Cut(parts[2], ".")
	vals := make([]uint64, 3)
	for i, p := range []string{parts[0], parts[1], devfn} {
		v, perr := strconv.ParseUint(p, 16, 32)
		if perr != nil {
			return 0, 0, 0, fmt.Errorf("nccl: PCI bus id %q: %v", s, perr)
		}
		vals[i] = v
	}
	return uint32(vals[0]), uint32(vals[1]), uint32(vals[2]), nil
}

// CUDADeviceString is the nccl-tests device column for CUDA device ord:
// "[0000:18:00] NVIDIA H200" (see CUDADevice).
func CUDADeviceString(rt *cuda.Runtime, ord int) (string, error) {
	pci, name, err := CUDADevice(rt, ord)
	if err != nil {
		return "", err
	}
	return "[" + pci + "] " + name, nil
}

// CUDADevice returns CUDA device ord's PCI address as nccl-tests prints it
// ("0000:18:00", from the CUDA runtime) and the name NVML gives the GPU at that address
// ("CUDA device N" when NVML is unavailable). CUDA and NVML may number GPUs
// differently; the bus id is what ties them together.
func CUDADevice(rt *cuda.Runtime, ord int) (pci, name string, err error) {
	dev, err := rt.Device(ord)
	if err != nil {
		return "", "", err
	}
	bus, err := dev.PCIBusID()
	if err != nil {
		return "", "", err
	}
	d, b, dv, err := ParseBusID(bus)
	if err != nil {
		return "", "", err
	}
	name = fmt.Sprintf("CUDA device %d", ord)
	if gpus, err := GPUs(); err == nil {
		for _, g := range gpus {
			if g.Domain == d && g.Bus == b && g.Device == dv {
				name = g.Name
			}
		}
	}
	return fmt.Sprintf("%04x:%02x:%02x", d, b, dv), name, nil
}
