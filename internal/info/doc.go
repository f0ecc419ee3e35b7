// Package info is `goccl info`: what this host offers a collective library, and
// which goccl transports can run here and, if not, why.
//
// It reads the host name and kernel, the CPUs (/proc/cpuinfo), memory and NUMA nodes
// (/sys/devices/system/node), the network interfaces with their addresses and link
// speeds (/sys/class/net/*/speed), RDMA devices (through github.com/Mellanox/rdmamap),
// NVIDIA GPUs (through NVML, only after nvml.Init succeeds; "no NVIDIA driver"
// otherwise), and opens every registered transport for a one-rank world, reporting
// the wrapped transport.ErrNotSupported reason of those that cannot run.
//
//	r := info.Gather(ctx, info.Options{})
//	r.WriteText(os.Stdout)
//
// Gather never fails: a probe that cannot answer records its reason in the report.
package info
