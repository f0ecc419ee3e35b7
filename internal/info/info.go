package info

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// Report is everything `goccl info` says about the host.
type Report struct {
	Host       Host        `json:"host"`
	CPU        CPU         `json:"cpu"`
	MemBytes   uint64      `json:"memory_bytes"`
	NUMA       []NUMANode  `json:"numa_nodes"`
	Interfaces []Interface `json:"interfaces"`
	RDMA       RDMA        `json:"rdma"`
	GPUs       GPUs        `json:"gpus"`
	// DAMON lists the kernel's DAMON memory monitors (kdamond threads). One that is on
	// takes a core in bursts (up to 8.8 ms on the development VM, BENCHMARKS.md,
	// "Speed", 28c), which shows in collectives whose ranks share the cores.
	DAMON      []Kdamond         `json:"damon"`
	Transports []TransportStatus `json:"transports"`
}

// Kdamond is one DAMON monitor (/sys/kernel/mm/damon/admin/kdamonds/<N>).
type Kdamond struct {
	ID         int      `json:"id"`
	State      string   `json:"state"`                // "on", "off"
	Operations string   `json:"operations,omitempty"` // what it watches: "paddr", "vaddr", "fvaddr"
	Schemes    []string `json:"schemes,omitempty"`    // the actions it takes on what it finds: "pageout", ...
}

// Host identifies the machine and the software.
type Host struct {
	Name      string `json:"name"`
	Kernel    string `json:"kernel"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	GoVersion string `json:"go_version"`
}

// CPU describes the processors.
type CPU struct {
	Model   string   `json:"model"`
	Logical int      `json:"logical_cpus"`
	Flags   []string `json:"flags"` // the vector extensions that matter to reduce kernels
}

// NUMANode is one memory node.
type NUMANode struct {
	ID       int    `json:"id"`
	CPUs     string `json:"cpus"` // "0-15,32-47"
	MemBytes uint64 `json:"memory_bytes"`
}

// Interface is one network interface.
type Interface struct {
	Name      string   `json:"name"`
	Up        bool     `json:"up"`
	Loopback  bool     `json:"loopback"`
	MTU       int      `json:"mtu"`
	SpeedMbps int      `json:"speed_mbps"` // -1 when the driver does not say (loopback, virtual NICs)
	MAC       string   `json:"mac,omitempty"`
	Addrs     []string `json:"addrs"`
	RDMA      string   `json:"rdma_device,omitempty"`
}

// RDMA lists the RDMA devices, or why there are none.
type RDMA struct {
	Devices []RDMADevice `json:"devices"`
	Note    string       `json:"note,omitempty"`
}

// RDMADevice is one RDMA device (an HCA).
type RDMADevice struct {
	Name        string   `json:"name"`
	Ports       []string `json:"ports"`
	CharDevices []string `json:"char_devices"`
}

// GPUs lists the NVIDIA GPUs, or why there are none.
type GPUs struct {
	Driver  string `json:"driver,omitempty"`
	CUDA    int    `json:"cuda_driver_version,omitempty"`
	Devices []GPU  `json:"devices"`
	Note    string `json:"note,omitempty"`
}

// GPU is one NVIDIA GPU.
type GPU struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	PCI      string `json:"pci"` // nccl-tests' "[0000:18:00] NVIDIA H200" form
	MemBytes uint64 `json:"memory_bytes"`
	NVLinks  int    `json:"active_nvlinks"`
}

// TransportStatus says whether a registered transport opens here.
type TransportStatus struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Options point the probes somewhere else than the live system (tests).
type Options struct {
	SysRoot  string // default "/sys"
	ProcRoot string // default "/proc"
	// RDMADevices and GPUDevices replace the rdmamap and NVML probes when set.
	RDMADevices func() (RDMA, error)
	GPUDevices  func() (GPUs, error)
	// SkipTransports leaves the transport probe out.
	SkipTransports bool
}

// Gather probes the host. It never fails: what a probe cannot learn is noted.
func Gather(ctx context.Context, o Options) Report {
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.RDMADevices == nil {
		o.RDMADevices = rdmaDevices
	}
	if o.GPUDevices == nil {
		o.GPUDevices = gpuDevices
	}
	var r Report
	r.Host = hostInfo()
	r.CPU = cpuInfo(o.ProcRoot)
	r.MemBytes = memTotal(filepath.Join(o.ProcRoot, "meminfo"), "MemTotal:")
	r.NUMA = numaNodes(o.SysRoot)
	var err error
	if r.RDMA, err = o.RDMADevices(); err != nil {
		r.RDMA.Note = err.Error()
	}
	r.Interfaces = interfaces(o.SysRoot, r.RDMA)
	if r.GPUs, err = o.GPUDevices(); err != nil {
		r.GPUs.Note = err.Error()
	}
	r.DAMON = kdamonds(o.SysRoot)
	if !o.SkipTransports {
		r.Transports = probeTransports(ctx, r.Host.Name)
	}
	return r
}

func hostInfo() Host {
	h := Host{OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
	h.Name, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	return h
}

// interesting CPU flags: what decides how fast a reduce kernel can be.
var cpuFlags = []string{"sse2", "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "asimd", "sve"}

func cpuInfo(procRoot string) CPU {
	c := CPU{Logical: runtime.NumCPU()}
	f, err := os.Open(filepath.Join(procRoot, "cpuinfo"))
	if err != nil {
		return c
	}
	defer f.Close()
	have := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name", "Model", "cpu model":
			if c.Model == "" {
				c.Model = v
			}
		case "flags", "Features":
			for _, fl := range strings.Fields(v) {
				have[fl] = true
			}
		}
	}
	for _, fl := range cpuFlags {
		if have[fl] {
			c.Flags = append(c.Flags, fl)
		}
	}
	return c
}

// memTotal reads "<label> N kB" from a meminfo-style file (0 when absent).
func memTotal(path, label string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, label); i >= 0 {
			f := strings.Fields(line[i+len(label):])
			if len(f) > 0 {
				n, _ := strconv.ParseUint(f[0], 10, 64)
				if len(f) > 1 && strings.EqualFold(f[1], "kB") {
					n *= 1024
				}
				return n
			}
		}
	}
	return 0
}

func numaNodes(sysRoot string) []NUMANode {
	dirs, _ := filepath.Glob(filepath.Join(sysRoot, "devices/system/node/node[0-9]*"))
	var nodes []NUMANode
	for _, d := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		cpus, _ := os.ReadFile(filepath.Join(d, "cpulist"))
		nodes = append(nodes, NUMANode{ID: id, CPUs: strings.TrimSpace(string(cpus)),
			MemBytes: memTotal(filepath.Join(d, "meminfo"), "MemTotal:")})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes
}

// kdamonds reads the DAMON monitors from sysRoot's kernel/mm/damon/admin (the sysfs
// interface, Linux 5.18 and later); none when the kernel has no DAMON or none is set up.
func kdamonds(sysRoot string) []Kdamond {
	base := filepath.Join(sysRoot, "kernel/mm/damon/admin/kdamonds")
	dirs, _ := filepath.Glob(filepath.Join(base, "[0-9]*"))
	var ks []Kdamond
	for _, d := range dirs {
		id, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		k := Kdamond{ID: id, State: readTrim(filepath.Join(d, "state")), Operations: readTrim(filepath.Join(d, "contexts/0/operations"))}
		schemes, _ := filepath.Glob(filepath.Join(d, "contexts/0/schemes/[0-9]*/action"))
		for _, a := range schemes {
			if v := readTrim(a); v != "" {
				k.Schemes = append(k.Schemes, v)
			}
		}
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].ID < ks[j].ID })
	return ks
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// linkSpeed reads /sys/class/net/<name>/speed in Mb/s; -1 when unknown (the file is
// absent, unreadable or says -1, as for loopback and most virtual NICs).
func linkSpeed(sysRoot, name string) int {
	b, err := os.ReadFile(filepath.Join(sysRoot, "class/net", name, "speed"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return -1
	}
	return n
}

func interfaces(sysRoot string, rd RDMA) []Interface {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	netdevRDMA := rdmaNetdevs(rd)
	out := make([]Interface, 0, len(ifs))
	for _, ifc := range ifs {
		i := Interface{Name: ifc.Name, Up: ifc.Flags&net.FlagUp != 0, Loopback: ifc.Flags&net.FlagLoopback != 0,
			MTU: ifc.MTU, SpeedMbps: linkSpeed(sysRoot, ifc.Name), MAC: ifc.HardwareAddr.String(), RDMA: netdevRDMA[ifc.Name]}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			i.Addrs = append(i.Addrs, a.String())
		}
		out = append(out, i)
	}
	return out
}

// probeTransports opens every registered transport for a one-rank world and closes
// it again; an error is the reason the transport cannot run here.
func probeTransports(ctx context.Context, host string) []TransportStatus {
	var out []TransportStatus
	for _, name := range transport.Names() {
		st := TransportStatus{Name: name}
		t, err := transport.Lookup(name)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var ep transport.Endpoint
			ep, err = t.Open(pctx, transport.Local{
				CommID: fmt.Sprintf("goccl-info-%d", os.Getpid()), Rank: 0, World: 1, Host: host,
				Store: rendezvous.NewMemStore(), Timeout: 10 * time.Second, Params: transport.Params{},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			cancel()
			if err == nil {
				st.OK = true
				ep.Close()
			}
		}
		if err != nil {
			st.Reason = err.Error()
		}
		out = append(out, st)
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// WriteText writes the report for people.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	h := r.Host
	p("host:\t%s (%s, %s/%s, %s)\n", h.Name, h.Kernel, h.OS, h.Arch, h.GoVersion)
	flags := strings.Join(r.CPU.Flags, " ")
	if flags == "" {
		flags = "no vector extensions reported"
	}
	p("cpus:\t%d x %s (%s)\n", r.CPU.Logical, orUnknown(r.CPU.Model), flags)
	p("memory:\t%s\n", gib(r.MemBytes))
	if len(r.NUMA) == 0 {
		p("numa:\tno NUMA information (/sys/devices/system/node absent)\n")
	} else {
		p("numa:\t%d node(s)\n", len(r.NUMA))
		for _, n := range r.NUMA {
			p("\tnode%d\tcpus %s\t%s\n", n.ID, n.CPUs, gib(n.MemBytes))
		}
	}
	p("network:\t%d interface(s)\n", len(r.Interfaces))
	for _, i := range r.Interfaces {
		state := "down"
		if i.Up {
			state = "up"
		}
		speed := "speed unknown"
		if i.SpeedMbps > 0 {
			speed = fmt.Sprintf("%d Mb/s", i.SpeedMbps)
		}
		extra := ""
		if i.RDMA != "" {
			extra = "  rdma " + i.RDMA
		}
		p("\t%s\t%s\tmtu %d\t%s\t%s%s\n", i.Name, state, i.MTU, speed, strings.Join(i.Addrs, " "), extra)
	}
	if len(r.RDMA.Devices) == 0 {
		p("rdma:\tnone (%s)\n", orUnknown(r.RDMA.Note))
	} else {
		p("rdma:\t%d device(s)\n", len(r.RDMA.Devices))
		for _, d := range r.RDMA.Devices {
			p("\t%s\tports %s\t%s\n", d.Name, strings.Join(d.Ports, ","), strings.Join(d.CharDevices, " "))
		}
	}
	if len(r.GPUs.Devices) == 0 {
		p("gpus:\tnone (%s)\n", orUnknown(r.GPUs.Note))
	} else {
		p("gpus:\t%d (driver %s, CUDA %d)\n", len(r.GPUs.Devices), r.GPUs.Driver, r.GPUs.CUDA)
		for _, g := range r.GPUs.Devices {
			p("\t%d\t%s\t%s\t%d NVLinks\n", g.Index, g.PCI, gib(g.MemBytes), g.NVLinks)
		}
	}
	if len(r.DAMON) == 0 {
		p("damon:\tno memory monitor running\n")
	}
	for _, k := range r.DAMON {
		what := orUnknown(k.Operations)
		if len(k.Schemes) > 0 {
			what += ", schemes " + strings.Join(k.Schemes, ",")
		}
		note := ""
		if k.State == "on" {
			note = "  (takes a core in bursts; benchmarks of ranks sharing cores see it)"
		}
		p("damon:\tkdamond %d %s (%s)%s\n", k.ID, orUnknown(k.State), what, note)
	}
	if r.Transports != nil {
		p("transports:\t\n")
		for _, t := range r.Transports {
			if t.OK {
				p("\t%s\tok\n", t.Name)
			} else {
				p("\t%s\tcannot run here: %s\n", t.Name, t.Reason)
			}
		}
	}
	return tw.Flush()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
