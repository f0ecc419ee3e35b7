package rdma

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/rdma/internal/soft"
	"github.com/goccl/goccl/rdma/internal/verbs"
	"github.com/goccl/goccl/transport"
)

// Name is the registry name of this transport.
const Name = "rdma"

func init() { transport.Register(Transport{}) }

// Transport is the RDMA transport. The zero value is ready to use; its settings come
// from the rdma.* keys of Local.Params.
type Transport struct{}

// Name returns "rdma".
func (Transport) Name() string { return Name }

// ParamPrefixes: rdma reads the "rdma." keys (transport.ParamChecker).
func (Transport) ParamPrefixes() []string { return []string{Name + "."} }

// CheckParams reports what ParseOptions would refuse.
func (Transport) CheckParams(p transport.Params) error {
	_, err := ParseOptions(p)
	return err
}

// Open opens the configured provider's device for this rank. Without a usable device
// (no libibverbs, no RDMA in the kernel, no matching HCA, no permission) it returns an
// error wrapping transport.ErrNotSupported, so a communicator configured with "auto"
// falls back to another transport.
func (Transport) Open(ctx context.Context, l transport.Local) (transport.Endpoint, error) {
	if l.Rank < 0 || l.Rank >= l.World {
		return nil, fmt.Errorf("rdma: %w: rank %d outside world of %d", transport.ErrInvalid, l.Rank, l.World)
	}
	if l.Store == nil {
		return nil, fmt.Errorf("rdma: %w: no rendezvous store to exchange connection data", transport.ErrInvalid)
	}
	o, err := ParseOptions(l.Params)
	if err != nil {
		return nil, err
	}
	dev, provider, err := openDevice(o)
	if err != nil {
		return nil, err
	}
	e := &endpoint{local: l, opts: o, dev: dev, provider: provider, cache: newMRCache(dev)}
	e.handle = handle{Provider: provider, Host: l.Host, Pid: os.Getpid(), Port: dev.Port()}.encode()
	return e, nil
}

// openDevice picks the provider: "soft" is the software emulation; "verbs" and "auto"
// open libibverbs (auto is the default; it never picks the emulation by itself, because
// on one host the shm transport is the better choice).
func openDevice(o Options) (rc.Device, string, error) {
	if o.Provider == "soft" {
		if !o.HCA.Match(soft.DeviceName, 1) {
			return nil, "", fmt.Errorf("rdma: %w: %s=%q excludes the software device %s", transport.ErrNotSupported, ParamHCA, o.HCA, soft.DeviceName)
		}
		d, err := soft.Open()
		return d, "soft", err
	}
	d, err := verbs.Open(verbs.Selector{Match: o.HCA.Match, GIDIndex: o.GIDIndex})
	if err != nil {
		return nil, "", fmt.Errorf("rdma: %w", err)
	}
	return d, "verbs", nil
}

// handle is what a rank publishes about its endpoint: enough for CanConnect to give the
// same answer on both sides.
type handle struct {
	Provider string
	Host     string
	Pid      int
	Port     rc.PortInfo
}

func (h handle) encode() []byte {
	var b bytes.Buffer
	for _, s := range []string{h.Provider, h.Host, h.Port.Device, h.Port.LinkLayer} {
		b.WriteByte(byte(min(len(s), 255)))
		b.WriteString(s[:min(len(s), 255)])
	}
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(h.Pid)))
	return b.Bytes()
}

func decodeHandle(p []byte) (handle, error) {
	r := &reader{b: p}
	var f [4]string
	for i := range f {
		f[i] = string(r.take(int(r.u8())))
	}
	pid := r.u32()
	if r.bad || len(r.b) != 0 {
		return handle{}, fmt.Errorf("rdma: %w: malformed endpoint handle (%d bytes)", transport.ErrProtocol, len(p))
	}
	return handle{Provider: f[0], Host: f[1], Pid: int(pid), Port: rc.PortInfo{Device: f[2], LinkLayer: f[3]}}, nil
}

type endpoint struct {
	local    transport.Local
	opts     Options
	dev      rc.Device
	provider string
	handle   []byte
	cache    *mrCache

	mu     sync.Mutex
	conns  int
	closed bool
}

func (e *endpoint) Handle() []byte { return e.handle }

// CanConnect accepts a peer on the same provider; the software provider only links
// processes on one host, and verbs needs the same link layer on both ends.
func (e *endpoint) CanConnect(p transport.PeerInfo) error {
	if p.Rank == e.local.Rank {
		return fmt.Errorf("rdma: %w: rank %d cannot link to itself", transport.ErrInvalid, p.Rank)
	}
	h, err := decodeHandle(p.Handle)
	if err != nil {
		return err
	}
	mine, _ := decodeHandle(e.handle)
	switch {
	case h.Provider != mine.Provider:
		return fmt.Errorf("rdma: %w: rank %d uses the %s provider, rank %d uses %s", transport.ErrNotSupported, p.Rank, h.Provider, e.local.Rank, mine.Provider)
	case h.Provider == "soft" && h.Host != mine.Host:
		return fmt.Errorf("rdma: %w: the software provider links processes on one host; rank %d is on %q, rank %d on %q",
			transport.ErrNotSupported, p.Rank, h.Host, e.local.Rank, mine.Host)
	case h.Port.LinkLayer != mine.Port.LinkLayer:
		return fmt.Errorf("rdma: %w: rank %d's port is %s, rank %d's is %s", transport.ErrNotSupported, p.Rank, h.Port.LinkLayer, e.local.Rank, mine.Port.LinkLayer)
	}
	return nil
}

func (e *endpoint) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	if e.conns == 0 {
		return e.dev.Close()
	}
	return nil // the last link's Close releases the device
}

func (e *endpoint) dropConn() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.conns--
	if e.closed && e.conns == 0 {
		e.dev.Close()
	}
}

func infoKey(from, to int) string  { return fmt.Sprintf("rdma/info/%d/%d", from, to) }
func readyKey(from, to int) string { return fmt.Sprintf("rdma/ready/%d/%d", from, to) }

// Connect builds the link: one registered arena, two CQs, QPsPerPeer RC QPs per
// direction; publishes their addresses, connects to the peer's, checks the peer's proof
// of the auth token, and exchanges a hello message over the new link.
func (e *endpoint) Connect(ctx context.Context, p transport.PeerInfo) (transport.Conn, error) {
	if err := e.CanConnect(p); err != nil {
		return nil, err
	}
	if p.Rank < 0 || p.Rank >= e.local.World {
		return nil, fmt.Errorf("rdma: %w: peer rank %d outside world of %d", transport.ErrInvalid, p.Rank, e.local.World)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("rdma: connect to rank %d: %w", p.Rank, transport.ErrClosed)
	}
	e.conns++
	e.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok && e.local.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.local.Timeout)
		defer cancel()
	}
	c, err := e.build(p)
	if err != nil {
		e.dropConn()
		return nil, err
	}
	if err := e.link(ctx, c, p); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// build allocates and registers the link's resources and posts its first receives.
func (e *endpoint) build(p transport.PeerInfo) (_ *conn, err error) {
	o := e.opts
	c := &conn{self: e.local.Rank, peer: p.Rank, host: p.Host, credits: o.Credits, chunk: o.ChunkBytes}
	var undo []func() error
	c.release = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		e.dropConn()
	}
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	mem, err := e.dev.Alloc(arenaSize(o.Credits, o.ChunkBytes))
	if err != nil {
		return nil, fmt.Errorf("rdma: allocate link memory for rank %d: %w", p.Rank, err)
	}
	undo = append(undo, mem.Free)
	if c.mr, err = e.cache.register(mem, rc.AccessLocalWrite|rc.AccessRemoteWrite); err != nil {
		return nil, fmt.Errorf("rdma: register link memory for rank %d: %w", p.Rank, err)
	}
	undo = append(undo, func() error { return e.cache.release(c.mr) })
	b := mem.Bytes()
	// Every work request of every QP on a CQ can hold one completion until it is polled.
	sendDepth, recvDepth := 2*o.Credits+8, o.Credits+2
	depth := o.QPsPerPeer * (sendDepth + recvDepth)
	for _, h := range []*half{&c.tx.half, &c.rx.half} {
		h.c = c
		if h.cq, err = e.dev.NewCQ(depth); err != nil {
			return nil, fmt.Errorf("rdma: create completion queue for rank %d: %w", p.Rank, err)
		}
		undo = append(undo, h.cq.Close)
		h.wcs = make([]rc.Completion, 32)
		h.qpIndex = map[uint32]int{}
		for i := 0; i < o.QPsPerPeer; i++ {
			qp, err := e.dev.NewQP(h.cq, sendDepth, recvDepth)
			if err != nil {
				return nil, fmt.Errorf("rdma: create queue pair for rank %d: %w", p.Rank, err)
			}
			undo = append(undo, qp.Close)
			h.qpIndex[qp.Num()] = i
			h.qps = append(h.qps, qp)
		}
	}
	c.tx.fifo = b[c.fifoOff():c.ctsOff()]
	c.rx.ctsStage = b[c.ctsOff():c.stageOff()]
	c.tx.stage = b[c.stageOff():c.ringOff()]
	c.rx.ring = b[c.ringOff() : c.ringOff()+o.Credits*o.ChunkBytes]
	// A CTS write that fails (the peer closed or died after sending) must not fail a
	// receive whose chunks have all arrived.
	c.rx.lenient = func(id uint64) bool { return wrKind(id) == wrCTS }
	c.tx.busy = make([]bool, o.Credits)
	c.rx.filled = make([]int, o.Credits)
	for i := range c.rx.filled {
		c.rx.filled[i] = -1
	}
	if err := c.tx.qps[0].PostRecv(wrID(wrRecv, 0), o.Credits+2); err != nil {
		return nil, fmt.Errorf("rdma: post receives for rank %d: %w", p.Rank, err)
	}
	for i, qp := range c.rx.qps {
		if err := qp.PostRecv(wrID(wrRecv, uint64(i)), o.Credits+2); err != nil {
			return nil, fmt.Errorf("rdma: post receives for rank %d: %w", p.Rank, err)
		}
	}
	c.desc = fmt.Sprintf("rdma/%s %s:%d rank %d <-> rank %d, %d QP(s) per direction, %d x %d-byte slots",
		e.provider, e.dev.Port().Device, e.dev.Port().Port, c.self, c.peer, o.QPsPerPeer, o.Credits, o.ChunkBytes)
	return c, nil
}

// link exchanges connection data through the store and brings the QPs up. Both sides
// post their receives before publishing "ready", so no write ever meets an empty queue.
func (e *endpoint) link(ctx context.Context, c *conn, p transport.PeerInfo) error {
	st, self, peer := e.local.Store, e.local.Rank, p.Rank
	mine := connInfo{Provider: e.provider, Rank: self, Peer: peer, Credits: c.credits, Chunk: c.chunk,
		FifoAddr: c.mr.Addr() + uint64(c.fifoOff()), FifoKey: c.mr.RKey(),
		RingAddr: c.mr.Addr() + uint64(c.ringOff()), RingKey: c.mr.RKey()}
	if _, err := rand.Read(mine.Nonce[:]); err != nil {
		return fmt.Errorf("rdma: nonce: %w", err)
	}
	for i := range c.tx.qps {
		mine.TX = append(mine.TX, c.tx.qps[i].Addr())
		mine.RX = append(mine.RX, c.rx.qps[i].Addr())
	}
	if err := st.Set(ctx, infoKey(self, peer), mine.encode()); err != nil {
		return fmt.Errorf("rdma: publish connection data for rank %d: %w", peer, err)
	}
	raw, err := st.Get(ctx, infoKey(peer, self))
	if err != nil {
		return c.peerErr("waiting for connection data: %w", storeErr(err))
	}
	theirs, err := decodeInfo(raw)
	if err != nil {
		return c.peerErr("%w", err)
	}
	if err := checkInfo(&mine, theirs); err != nil {
		return err
	}
	for i := range c.tx.qps {
		if err := c.tx.qps[i].Connect(theirs.RX[i]); err != nil {
			return c.peerErr("connect sending QP %d: %w", i, err)
		}
		if err := c.rx.qps[i].Connect(theirs.TX[i]); err != nil {
			return c.peerErr("connect receiving QP %d: %w", i, err)
		}
	}
	c.rx.peerFifo = cts{addr: theirs.FifoAddr, rkey: theirs.FifoKey}
	c.tx.probeTo = cts{addr: theirs.RingAddr, rkey: theirs.RingKey}
	var pr []byte
	if len(e.local.AuthToken) > 0 {
		pr = proof(e.local.AuthToken, e.local.CommID, self, peer, theirs.Nonce)
	}
	if err := st.Set(ctx, readyKey(self, peer), append([]byte{1}, pr...)); err != nil {
		return fmt.Errorf("rdma: publish ready for rank %d: %w", peer, err)
	}
	ready, err := st.Get(ctx, readyKey(peer, self))
	if err != nil {
		return c.peerErr("waiting for the peer's queue pairs: %w", storeErr(err))
	}
	if len(e.local.AuthToken) > 0 {
		want := proof(e.local.AuthToken, e.local.CommID, peer, self, mine.Nonce)
		if len(ready) < 1 || !bytesEqualConst(ready[1:], want) {
			return c.peerErr("%w: rank %d did not prove it holds this communicator's auth token", transport.ErrAuth, peer)
		}
	}
	for s := uint64(0); s < uint64(c.credits); s++ {
		if err := c.rx.advertise(s); err != nil {
			return err
		}
	}
	hello := transport.Header{Fp: transport.Fingerprint{Kind: transport.KindControl, Root: -1}, Tag: helloTag}
	payload := []byte(fmt.Sprintf("%s/%d->%d", e.local.CommID, self, peer))
	want := []byte(fmt.Sprintf("%s/%d->%d", e.local.CommID, peer, self))
	if err := c.Send(ctx, hello, payload); err != nil {
		return err
	}
	got := make([]byte, len(want))
	if err := c.Recv(ctx, hello, got); err != nil {
		var me *transport.MismatchError
		if errors.As(err, &me) {
			return c.peerErr("%w: hello does not match (is rank %d in communicator %q?)", transport.ErrProtocol, peer, e.local.CommID)
		}
		return err
	}
	if !bytes.Equal(got, want) {
		return c.peerErr("%w: hello %q, want %q", transport.ErrProtocol, got, want)
	}
	// The peer has read both keys: its hello follows its reading them.
	_ = st.Delete(ctx, infoKey(self, peer))
	_ = st.Delete(ctx, readyKey(self, peer))
	return nil
}

const helloTag = 0x68656c6f // "helo"

func checkInfo(mine, theirs *connInfo) error {
	bad := func(what string, a, b any) error {
		return &transport.PeerError{Peer: theirs.Rank, Err: fmt.Errorf("rdma: %w: %s differs: rank %d has %v, rank %d has %v",
			transport.ErrInvalid, what, mine.Rank, a, theirs.Rank, b)}
	}
	switch {
	case theirs.Rank != mine.Peer || theirs.Peer != mine.Rank:
		return fmt.Errorf("rdma: %w: connection data for ranks %d->%d arrived where %d->%d was expected",
			transport.ErrProtocol, theirs.Rank, theirs.Peer, mine.Peer, mine.Rank)
	case theirs.Provider != mine.Provider:
		return bad(ParamProvider, mine.Provider, theirs.Provider)
	case theirs.Credits != mine.Credits:
		return bad(ParamCredits, mine.Credits, theirs.Credits)
	case theirs.Chunk != mine.Chunk:
		return bad(ParamChunkBytes, mine.Chunk, theirs.Chunk)
	case len(theirs.TX) != len(mine.TX):
		return bad(ParamQPsPerPeer, len(mine.TX), len(theirs.TX))
	}
	return nil
}

func storeErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, transport.ErrTimeout) {
		return fmt.Errorf("%w: %w", transport.ErrTimeout, err)
	}
	return err
}

func bytesEqualConst(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := range a {
		v |= a[i] ^ b[i]
	}
	return v == 0
}
