//go:build linux && cgo

package verbs

/*
#cgo CFLAGS: -D_GNU_SOURCE
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "loader.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

var (
	loadOnce sync.Once
	loadErr  error
)

// load opens the library once per process.
func load() error {
	loadOnce.Do(func() { loadErr = loadFrom([]string{Library}) })
	return loadErr
}

// loadFrom tries each name in turn and resolves every symbol of the first that opens.
func loadFrom(names []string) error {
	// dlerror is per thread: keep dlopen and dlerror on one OS thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var why []string
	for _, n := range names {
		cn := C.CString(n)
		var cerr *C.char
		h := C.gv_open(cn, &cerr)
		C.free(unsafe.Pointer(cn))
		if h == nil {
			why = append(why, C.GoString(cerr))
			continue
		}
		if missing := C.gv_resolve(h); missing != nil {
			return fmt.Errorf("verbs: %w: %s has no %s@IBVERBS_1.1 (rdma-core too old?)", transport.ErrNotSupported, n, C.GoString(missing))
		}
		return nil
	}
	return fmt.Errorf("verbs: %w: cannot load libibverbs (searched %s): %s (install rdma-core's libibverbs1)",
		transport.ErrNotSupported, searched(names), strings.Join(why, "; "))
}

// StatusString is libibverbs' own ibv_wc_status_str, for checking rc.Status's names.
func StatusString(s int) (string, error) {
	if err := load(); err != nil {
		return "", err
	}
	return C.GoString(C.gv_wc_status_str(C.int(s))), nil
}

// Probe loads the library and lists devices without opening one: nil when at least one
// device exists, else the reason (wrapping transport.ErrNotSupported).
func Probe() error {
	if err := load(); err != nil {
		return err
	}
	list, n, err := deviceList()
	if err != nil {
		return err
	}
	C.gv_free_device_list(list)
	if n == 0 {
		return fmt.Errorf("verbs: %w: no RDMA devices", transport.ErrNotSupported)
	}
	return nil
}

func deviceList() (**C.struct_gv_device, int, error) {
	var n C.int
	list, errno := C.gv_get_device_list(&n)
	if list == nil {
		if errors.Is(errno, syscall.ENOSYS) {
			return nil, 0, fmt.Errorf("verbs: %w: ibv_get_device_list: %v (this kernel has no RDMA support)", transport.ErrNotSupported, errno)
		}
		if errno == nil {
			errno = syscall.ENODEV
		}
		return nil, 0, fmt.Errorf("verbs: %w: ibv_get_device_list: %v", transport.ErrNotSupported, errno)
	}
	return list, int(n), nil
}

type device struct {
	ctx      *C.struct_gv_context
	pd       *C.struct_gv_pd
	port     rc.PortInfo
	closeMu  sync.Mutex
	isClosed bool
}

// Open loads libibverbs and opens the first active port that sel accepts, with a
// protection domain.
func Open(sel Selector) (rc.Device, error) {
	if err := load(); err != nil {
		return nil, err
	}
	list, n, err := deviceList()
	if err != nil {
		return nil, err
	}
	defer C.gv_free_device_list(list)
	if n == 0 {
		return nil, fmt.Errorf("verbs: %w: no RDMA devices", transport.ErrNotSupported)
	}
	var seen []string
	for i := 0; i < n; i++ {
		dev := C.gv_device_at(list, C.int(i))
		name := C.GoString(C.gv_device_name(dev))
		ctx, errno := C.gv_open_device(dev)
		if ctx == nil {
			seen = append(seen, fmt.Sprintf("%s: open: %v", name, errno))
			continue
		}
		d, why := openPort(ctx, name, sel)
		if d != nil {
			return d, nil
		}
		C.gv_close_device(ctx)
		seen = append(seen, why...)
	}
	return nil, fmt.Errorf("verbs: %w: no usable RDMA port (%s)", transport.ErrNotSupported, strings.Join(seen, "; "))
}

func openPort(ctx *C.struct_gv_context, name string, sel Selector) (*device, []string) {
	var attr C.struct_gv_device_attr
	if rc := C.gv_query_device(ctx, &attr); rc != 0 {
		return nil, []string{fmt.Sprintf("%s: query device: %v", name, syscall.Errno(rc))}
	}
	var why []string
	for p := 1; p <= int(attr.phys_port_cnt); p++ {
		if sel.Match != nil && !sel.Match(name, p) {
			why = append(why, fmt.Sprintf("%s:%d excluded by the HCA list", name, p))
			continue
		}
		var pa C.struct_gv_port_attr
		if rc := C.gv_query_port(ctx, C.int(p), &pa); rc != 0 {
			why = append(why, fmt.Sprintf("%s:%d: query port: %v", name, p, syscall.Errno(rc)))
			continue
		}
		if pa.state != C.GV_PORT_ACTIVE {
			why = append(why, fmt.Sprintf("%s:%d is not active (state %d)", name, p, int(pa.state)))
			continue
		}
		info := rc.PortInfo{Device: name, Port: p, LID: uint16(pa.lid), MTU: uint8(pa.active_mtu), LinkLayer: "InfiniBand", GIDIndex: -1}
		if pa.link_layer == C.GV_LINK_LAYER_ETHERNET {
			info.LinkLayer = "Ethernet"
			idx, gid, err := pickGID(ctx, name, p, int(pa.gid_tbl_len), sel.GIDIndex)
			if err != nil {
				why = append(why, err.Error())
				continue
			}
			info.GIDIndex, info.GID = idx, gid
		}
		pd, errno := C.gv_alloc_pd(ctx)
		if pd == nil {
			why = append(why, fmt.Sprintf("%s: allocate protection domain: %v", name, errno))
			continue
		}
		return &device{ctx: ctx, pd: pd, port: info}, nil
	}
	return nil, why
}

// pickGID returns the configured GID index, or scans for a RoCE v2 entry (preferring an
// IPv4-mapped one) using the GID types the kernel lists in sysfs, as NCCL does.
func pickGID(ctx *C.struct_gv_context, dev string, port, n, want int) (int, [16]byte, error) {
	var gid C.union_gv_gid
	read := func(i int) ([16]byte, bool) {
		var g [16]byte
		if C.gv_query_gid(ctx, C.int(port), C.int(i), &gid) != 0 {
			return g, false
		}
		copy(g[:], C.GoBytes(unsafe.Pointer(&gid), 16))
		return g, g != [16]byte{}
	}
	if want >= 0 {
		if g, ok := read(want); ok {
			return want, g, nil
		}
		return 0, [16]byte{}, fmt.Errorf("%s:%d: GID index %d is empty or beyond the table of %d", dev, port, want, n)
	}
	best, bestGID := -1, [16]byte{}
	for i := 0; i < n; i++ {
		g, ok := read(i)
		if !ok {
			continue
		}
		t, _ := os.ReadFile(filepath.Join("/sys/class/infiniband", dev, "ports", fmt.Sprint(port), "gid_attrs", "types", fmt.Sprint(i)))
		if !strings.Contains(strings.ToLower(string(t)), "v2") {
			continue
		}
		v4 := [12]byte{10: 0xff, 11: 0xff}
		if [12]byte(g[:12]) == v4 {
			return i, g, nil
		}
		if best < 0 {
			best, bestGID = i, g
		}
	}
	if best < 0 {
		return 0, [16]byte{}, fmt.Errorf("%s:%d: no RoCE v2 GID (set rdma.gid_index)", dev, port)
	}
	return best, bestGID, nil
}

func (d *device) Port() rc.PortInfo { return d.port }

type memory struct{ b []byte }

func (m *memory) Bytes() []byte { return m.b }
func (m *memory) Free() error {
	if m.b == nil {
		return nil
	}
	err := unix.Munmap(m.b)
	m.b = nil
	return err
}

// Alloc maps anonymous memory: page aligned, outside the Go heap, safe to register.
func (d *device) Alloc(n int) (rc.Memory, error) {
	p := os.Getpagesize()
	b, err := unix.Mmap(-1, 0, (max(n, 1)+p-1)/p*p, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("verbs: map %d bytes: %w", n, err)
	}
	return &memory{b: b}, nil
}

type mr struct{ p *C.struct_gv_mr }

func (m *mr) Addr() uint64 { return uint64(uintptr(m.p.addr)) }
func (m *mr) Len() int     { return int(m.p.length) }
func (m *mr) LKey() uint32 { return uint32(m.p.lkey) }
func (m *mr) RKey() uint32 { return uint32(m.p.rkey) }
func (m *mr) Close() error {
	if rc := C.gv_dereg_mr(m.p); rc != 0 {
		return fmt.Errorf("verbs: ibv_dereg_mr: %v", syscall.Errno(rc))
	}
	return nil
}

func (d *device) Register(m rc.Memory, access rc.Access) (rc.MR, error) {
	b := m.Bytes()
	if len(b) == 0 {
		return nil, fmt.Errorf("verbs: register: %w: empty memory", transport.ErrInvalid)
	}
	p, errno := C.gv_reg_mr(d.pd, C.uintptr_t(uintptr(unsafe.Pointer(&b[0]))), C.size_t(len(b)), C.int(access))
	if p == nil {
		return nil, fmt.Errorf("verbs: ibv_reg_mr of %d bytes on %s: %v (is the memlock limit too low? see ulimit -l)", len(b), d.port.Device, errno)
	}
	return &mr{p: p}, nil
}

type cq struct {
	p    *C.struct_gv_cq
	wcs  []C.struct_gv_wc
	idle int
}

func (d *device) NewCQ(depth int) (rc.CQ, error) {
	p, errno := C.gv_create_cq(d.ctx, C.int(depth))
	if p == nil {
		return nil, fmt.Errorf("verbs: ibv_create_cq(%d) on %s: %v", depth, d.port.Device, errno)
	}
	return &cq{p: p}, nil
}

func (c *cq) Poll(out []rc.Completion) (int, error) {
	if len(c.wcs) < len(out) {
		c.wcs = make([]C.struct_gv_wc, len(out))
	}
	n := int(C.gv_poll_cq(c.p, C.int(len(out)), &c.wcs[0]))
	if n < 0 {
		return 0, fmt.Errorf("verbs: ibv_poll_cq failed (%d)", n)
	}
	for i := 0; i < n; i++ {
		w := &c.wcs[i]
		out[i] = rc.Completion{ID: uint64(w.wr_id), Status: rc.Status(w.status), Opcode: rc.WCOpcode(w.opcode),
			Len: uint32(w.byte_len), Imm: uint32(w.imm_data), QPNum: uint32(w.qp_num), VendorErr: uint32(w.vendor_err)}
	}
	if n > 0 {
		c.idle = 0
	}
	return n, nil
}

// Wait spins briefly (completions usually follow within microseconds) and then sleeps
// in short steps; no completion channel, so no file descriptor per CQ.
func (c *cq) Wait(d time.Duration) {
	c.idle++
	if c.idle < 64 {
		runtime.Gosched()
		return
	}
	time.Sleep(min(d, 50*time.Microsecond))
}

func (c *cq) Wake() {}

func (c *cq) Close() error {
	if rc := C.gv_destroy_cq(c.p); rc != 0 {
		return fmt.Errorf("verbs: ibv_destroy_cq: %v", syscall.Errno(rc))
	}
	return nil
}

type qp struct {
	d   *device
	p   *C.struct_gv_qp
	psn uint32
}

func (d *device) NewQP(c rc.CQ, sendDepth, recvDepth int) (rc.QP, error) {
	vc, ok := c.(*cq)
	if !ok {
		return nil, fmt.Errorf("verbs: create qp: %w: completion queue is not from this provider", transport.ErrInvalid)
	}
	p, errno := C.gv_create_qp(d.pd, vc.p, C.int(sendDepth), C.int(recvDepth))
	if p == nil {
		return nil, fmt.Errorf("verbs: ibv_create_qp on %s: %v", d.port.Device, errno)
	}
	if rc := C.gv_qp_init(p, C.int(d.port.Port)); rc != 0 {
		C.gv_destroy_qp(p)
		return nil, fmt.Errorf("verbs: modify QP to INIT on %s: %v", d.port.Device, syscall.Errno(rc))
	}
	var b [4]byte
	if _, err := randRead(b[:]); err != nil {
		C.gv_destroy_qp(p)
		return nil, err
	}
	psn := (uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16) & 0xffffff
	return &qp{d: d, p: p, psn: psn}, nil
}

func (q *qp) Num() uint32 { return uint32(C.gv_qp_num(q.p)) }

func (q *qp) Addr() rc.Addr {
	pi := q.d.port
	return rc.Addr{QPN: q.Num(), PSN: q.psn, LID: pi.LID, GID: pi.GID, MTU: pi.MTU}
}

func (q *qp) Connect(remote rc.Addr) error {
	pi := q.d.port
	mtu := min(pi.MTU, remote.MTU)
	global := 0
	if pi.LinkLayer == "Ethernet" {
		global = 1
	}
	gid := remote.GID
	rc_ := C.gv_qp_connect(q.p, C.int(pi.Port), C.int(mtu), C.uint32_t(remote.QPN), C.uint32_t(remote.PSN),
		C.uint32_t(q.psn), C.int(global), C.uint16_t(remote.LID), (*C.uint8_t)(unsafe.Pointer(&gid[0])), C.int(max(pi.GIDIndex, 0)),
		rc.Timeout, rc.RetryCount, rc.RNRRetry, rc.MinRNRTime)
	if rc_ != 0 {
		return fmt.Errorf("verbs: modify QP %d to RTR/RTS towards QP %d: %v", q.Num(), remote.QPN, syscall.Errno(rc_))
	}
	return nil
}

func (q *qp) PostSend(wrs []rc.SendWR) error {
	for i := range wrs {
		w := &wrs[i]
		var laddr uint64
		var lkey uint32
		if w.Len > 0 {
			m, ok := w.Local.(*mr)
			if !ok || w.Offset < 0 || w.Offset+w.Len > m.Len() {
				return fmt.Errorf("verbs: post send: %w: local range [%d, +%d) is outside the registered region", transport.ErrInvalid, w.Offset, w.Len)
			}
			laddr, lkey = m.Addr()+uint64(w.Offset), m.LKey()
		}
		sig := 0
		if w.Signaled {
			sig = 1
		}
		if rc_ := C.gv_post_write(q.p, C.uint64_t(w.ID), C.int(w.Op), C.uint64_t(laddr), C.uint32_t(w.Len), C.uint32_t(lkey),
			C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey), C.uint32_t(w.Imm), C.int(sig)); rc_ != 0 {
			return fmt.Errorf("verbs: ibv_post_send on QP %d: %v", q.Num(), syscall.Errno(rc_))
		}
	}
	return nil
}

func (q *qp) PostRecv(id uint64, n int) error {
	if rc_ := C.gv_post_recv(q.p, C.uint64_t(id), C.int(n)); rc_ != 0 {
		return fmt.Errorf("verbs: ibv_post_recv on QP %d: %v", q.Num(), syscall.Errno(rc_))
	}
	return nil
}

func (q *qp) Close() error {
	if rc_ := C.gv_destroy_qp(q.p); rc_ != 0 {
		return fmt.Errorf("verbs: ibv_destroy_qp %d: %v", q.Num(), syscall.Errno(rc_))
	}
	return nil
}

func (d *device) Close() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.isClosed {
		return nil
	}
	d.isClosed = true
	C.gv_dealloc_pd(d.pd)
	if rc_ := C.gv_close_device(d.ctx); rc_ != 0 {
		return fmt.Errorf("verbs: ibv_close_device %s: %v", d.port.Device, syscall.Errno(rc_))
	}
	return nil
}
