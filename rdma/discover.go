package rdma

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/Mellanox/rdmamap"

	"github.com/goccl/goccl/rdma/internal/verbs"
)

// Device is one RDMA device as the host's sysfs describes it.
type Device struct {
	Name     string   // "mlx5_0"
	NodeGUID string   // "b859:9f03:00d4:4e2a"
	PCI      string   // PCI address of the function, "0000:05:00.0" ("" for soft devices such as rxe)
	Netdevs  []string // network interfaces backed by this device ("ib0", "enp5s0f0")
	Ports    []Port
}

// Port is one port of a Device.
type Port struct {
	Num       int
	State     string // "ACTIVE", "DOWN", ... (the sysfs "4: ACTIVE" without the number)
	PhysState string // "LinkUp", "Disabled", ...
	LinkLayer string // "InfiniBand" or "Ethernet"
	Rate      string // "200 Gb/sec (4X HDR)"
	// Counters are the port's counters/ files, HWCounters its hw_counters/ files.
	Counters   map[string]uint64
	HWCounters map[string]uint64
}

// Active reports whether the port can carry traffic.
func (p Port) Active() bool { return p.State == "ACTIVE" }

// sysfs is where discovery reads from: rdmamap's view of /sys/class/infiniband on a real
// host, a directory tree in tests (rdmamap's paths are fixed constants).
type sysfs struct {
	root     string
	devices  func() []string
	ports    func(dev string) []string
	counters func(dev string, port int) (stats, hw []rdmamap.RdmaStatEntry)
	netdevs  func() map[string][]string // device -> netdevs
}

func hostSysfs() sysfs {
	return sysfs{
		root:    rdmamap.RdmaClassDir,
		devices: rdmamap.GetRdmaDeviceList,
		ports:   rdmamap.GetPorts,
		counters: func(dev string, port int) ([]rdmamap.RdmaStatEntry, []rdmamap.RdmaStatEntry) {
			s, _ := rdmamap.GetRdmaSysfsStats(dev, port)
			hw, _ := rdmamap.GetRdmaSysfsHwStats(dev, port)
			return s, hw
		},
		netdevs: func() map[string][]string {
			m := map[string][]string{}
			ifs, _ := net.Interfaces()
			for _, i := range ifs {
				if dev, err := rdmamap.GetRdmaDeviceForNetdevice(i.Name); err == nil {
					m[dev] = append(m[dev], i.Name)
				}
			}
			return m
		},
	}
}

// Discover lists the host's RDMA devices with their ports, link state, network
// interfaces, PCI addresses and counters (through github.com/Mellanox/rdmamap and
// sysfs). A host without RDMA (no /sys/class/infiniband) has none: the result is empty
// and the error nil. `goccl info` prints this; it never opens a device.
func Discover() ([]Device, error) { return discover(hostSysfs()), nil }

func discover(fs sysfs) []Device {
	names := fs.devices()
	sort.Strings(names)
	var nd map[string][]string
	if len(names) > 0 {
		nd = fs.netdevs()
	}
	out := []Device{}
	for _, name := range names {
		d := Device{Name: name, NodeGUID: fs.attr(name, "node_guid"), PCI: fs.pci(name), Netdevs: nd[name]}
		sort.Strings(d.Netdevs)
		ports := fs.ports(name)
		sort.Slice(ports, func(i, j int) bool { return atoi(ports[i]) < atoi(ports[j]) })
		for _, ps := range ports {
			n := atoi(ps)
			if n <= 0 {
				continue
			}
			rel := filepath.Join("ports", ps)
			p := Port{Num: n, State: stateName(fs.attr(name, rel, "state")), PhysState: stateName(fs.attr(name, rel, "phys_state")),
				LinkLayer: fs.attr(name, rel, "link_layer"), Rate: fs.attr(name, rel, "rate")}
			stats, hw := fs.counters(name, n)
			p.Counters, p.HWCounters = statMap(stats), statMap(hw)
			d.Ports = append(d.Ports, p)
		}
		out = append(out, d)
	}
	return out
}

func (fs sysfs) attr(parts ...string) string {
	b, err := os.ReadFile(filepath.Join(append([]string{fs.root}, parts...)...))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// pci resolves the device link (…/devices/pci0000:00/0000:00:02.0/0000:05:00.0) to the
// PCI address, its last element when that looks like one.
func (fs sysfs) pci(dev string) string {
	p, err := filepath.EvalSymlinks(filepath.Join(fs.root, dev, "device"))
	if err != nil {
		return ""
	}
	base := filepath.Base(p)
	if strings.Count(base, ":") == 2 && strings.Contains(base, ".") {
		return base
	}
	return ""
}

// stateName turns sysfs's "4: ACTIVE" into "ACTIVE".
func stateName(s string) string {
	if _, name, ok := strings.Cut(s, ": "); ok {
		return name
	}
	return s
}

func statMap(es []rdmamap.RdmaStatEntry) map[string]uint64 {
	if len(es) == 0 {
		return nil
	}
	m := make(map[string]uint64, len(es))
	for _, e := range es {
		m[e.Name] = e.Value
	}
	return m
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// Probe reports whether the verbs provider can run here: nil when libibverbs loads and
// lists at least one device, else the reason, wrapping transport.ErrNotSupported (on a
// kernel without RDMA: "ibv_get_device_list: function not implemented"). It opens no
// device. `goccl info` uses it beside Discover.
func Probe() error {
	if err := verbs.Probe(); err != nil {
		return fmt.Errorf("rdma: %w", err)
	}
	return nil
}
