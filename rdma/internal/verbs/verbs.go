// Package verbs is the libibverbs provider of goccl's RDMA transport. It loads
// libibverbs.so.1 at run time with dlopen and resolves each exported verb with
// dlvsym(..., "IBVERBS_1.1"), as NCCL's ibvwrap does, so building needs no rdma-core
// headers and a binary starts on hosts without them. The static-inline verbs
// (ibv_post_send, ibv_post_recv, ibv_poll_cq) are called through the context's ops
// table. The few structs used are declared in abi.h; the abicheck package compares
// their sizes and offsets with the real <infiniband/verbs.h>.
//
// Without cgo, without the library, without RDMA in the kernel (ibv_get_device_list
// fails with ENOSYS), without an active port that passes the HCA filter, or without
// permission to open the device, Open returns an error wrapping
// transport.ErrNotSupported that says which of these it was.
//
// Verified where: the loader and its errors run on every host with cgo; the struct
// layout is checked against the installed headers; opening a device, QPs and data
// movement run only where an RDMA device exists.
package verbs

import (
	"strings"
)

// Selector chooses the device port Open uses.
type Selector struct {
	// Match reports whether a device's port may be used (nil = any).
	Match func(device string, port int) bool
	// GIDIndex is the RoCE GID index; -1 picks a RoCE v2 IPv4-mapped entry, as NCCL does.
	GIDIndex int
}

// Library is the soname dlopen looks for (the major version, as on every distribution).
const Library = "libibverbs.so.1"

func searched(names []string) string { return strings.Join(names, ", ") }
