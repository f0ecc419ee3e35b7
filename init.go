package goccl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccl/goccl/shm"
	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// protocolVersion is bumped when the peer record or wire conventions change.
const protocolVersion = 1

// peerRecord is what each rank publishes at Init.
type peerRecord struct {
	Version int               `json:"version"`
	Rank    int               `json:"rank"`
	World   int               `json:"world"`
	Host    string            `json:"host"`
	Pid     int               `json:"pid"`
	Algo    string            `json:"algo"`
	Handles map[string][]byte `json:"handles"`
}

// autoTransports is what "auto" expands to, in order of preference.
var autoTransports = []string{"shm", "rdma", "tcp"}

// Init creates the communicator described by cfg: it reaches the rendezvous store,
// publishes this rank, learns its peers, chooses a transport per peer pair and
// connects to every peer. It is bounded by cfg.InitTimeout. If any rank fails, every
// rank's Init returns an error naming it.
func Init(ctx context.Context, cfg Config) (*Comm, error) {
	if cfg.err != nil {
		return nil, cfg.err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.InitTimeout)
	defer cancel()
	store, closeStore, err := openStore(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	// The n-th Init of each rank on this store joins the n-th communicator of this name.
	n, err := store.Add(ctx, fmt.Sprintf("goccl/%s/inits/%d", cfg.Name, cfg.Rank), 1)
	if err != nil {
		if closeStore != nil {
			closeStore.Close()
		}
		return nil, fmt.Errorf("goccl: rank %d: rendezvous: %w", cfg.Rank, err)
	}
	id := fmt.Sprintf("%s.%d", cfg.Name, n-1)
	c, err := newComm(ctx, cfg, store, id)
	if err != nil {
		if closeStore != nil {
			closeStore.Close()
		}
		return nil, err
	}
	if closeStore != nil {
		c.closers = append([]io.Closer{closeStore}, c.closers...)
	}
	return c, nil
}

func (cfg *Config) validate() error {
	if cfg.WorldSize < 1 || cfg.Rank < 0 {
		return fmt.Errorf("goccl: %w: rank %d of world size %d is not set: launch with `goccl run -n N`, "+
			"torchrun, srun or mpirun, or set GOCCL_RANK and GOCCL_WORLD_SIZE (or WithRank)", transport.ErrInvalid, cfg.Rank, cfg.WorldSize)
	}
	if cfg.Rank >= cfg.WorldSize {
		return fmt.Errorf("goccl: %w: rank %d is out of range for world size %d (valid: 0..%d)",
			transport.ErrInvalid, cfg.Rank, cfg.WorldSize, cfg.WorldSize-1)
	}
	if len(cfg.Transports) == 0 {
		return fmt.Errorf("goccl: %w: empty transport list (valid: auto, %s)", transport.ErrInvalid, strings.Join(transport.Names(), ", "))
	}
	for _, t := range cfg.Transports {
		if t == "auto" {
			continue
		}
		if _, err := transport.Lookup(t); err != nil {
			return fmt.Errorf("goccl: transport list %q: %w", strings.Join(cfg.Transports, ","), err)
		}
	}
	if err := checkDebug(cfg.Debug, cfg.DebugSubsys); err != nil {
		return err
	}
	if err := transport.CheckParams(cfg.Params); err != nil {
		return fmt.Errorf("goccl: %w", err)
	}
	if cfg.Timeout <= 0 || cfg.InitTimeout <= 0 {
		return fmt.Errorf("goccl: %w: timeouts must be positive (timeout %v, init_timeout %v)", transport.ErrInvalid, cfg.Timeout, cfg.InitTimeout)
	}
	if _, err := newSelector(cfg.Algo); err != nil {
		return err
	}
	switch cfg.AlgoTune {
	case "", AlgoTuneModel, AlgoTuneOnline:
	default:
		return fmt.Errorf("goccl: %w: algo_tune %q (valid: %s, %s)", transport.ErrInvalid, cfg.AlgoTune, AlgoTuneModel, AlgoTuneOnline)
	}
	if cfg.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			h = "localhost"
		}
		cfg.Host = h
	}
	return nil
}

// openStore returns the store scoped for goccl and, when Init created the client (or
// server), the closer that releases it.
func openStore(ctx context.Context, cfg *Config) (transport.Store, io.Closer, error) {
	if cfg.StoreClient != nil {
		return cfg.StoreClient, nil, nil
	}
	addr := cfg.Store
	switch {
	case addr == "" && cfg.WorldSize == 1:
		s := rendezvous.NewMemStore()
		return s, s, nil
	case addr == "":
		return nil, nil, fmt.Errorf("goccl: %w: no rendezvous store for rank %d of %d: set GOCCL_STORE=host:port "+
			"(or MASTER_ADDR and MASTER_PORT), or launch with `goccl run`", transport.ErrInvalid, cfg.Rank, cfg.WorldSize)
	case strings.HasPrefix(addr, "file:"):
		s, err := rendezvous.NewFileStore(strings.TrimPrefix(addr, "file:"))
		if err != nil {
			return nil, nil, fmt.Errorf("goccl: %w", err)
		}
		return s, s, nil
	}
	s, err := rendezvous.ServeOrDial(ctx, addr, cfg.Rank == 0, rendezvous.ClientOptions{
		Timeout: cfg.InitTimeout, AuthToken: []byte(cfg.AuthToken)})
	if err != nil {
		return nil, nil, fmt.Errorf("goccl: rank %d: %w", cfg.Rank, err)
	}
	return s, s, nil
}

func newComm(ctx context.Context, cfg Config, base transport.Store, id string) (*Comm, error) {
	sel, _ := newSelector(cfg.Algo)
	c := &Comm{
		cfg: cfg, rank: cfg.Rank, size: cfg.WorldSize, localRank: cfg.LocalRank, host: cfg.Host, id: id,
		store:     rendezvous.WithPrefix(base, "goccl/"+id),
		eps:       map[string]transport.Endpoint{},
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		loopDone:  make(chan struct{}),
		watchStop: make(chan struct{}),
		watchDone: make(chan struct{}),
		sendSeq:   make([]uint64, cfg.WorldSize),
		recvSeq:   make([]uint64, cfg.WorldSize),
	}
	c.sel.Store(sel)
	c.directMin, c.stagedMin = -1, -1
	if o, err := shm.ParseOptions(cfg.Params); err == nil {
		c.directMin, c.stagedMin, c.stagedMax, c.stagingBytes, c.shmDir = o.DirectMin, o.StagedMin, o.StagedMax, o.StagingBytes, o.Dir
		c.stagedSet = o.StagedMin != 0 || o.StagedMax != 0
		c.streamAuto = o.StreamStores == shm.SwitchAuto
		if c.directMin == 0 {
			c.directMin = shm.DirectMinFor(cfg.WorldSize)
		}
		// An unset stagedMin (0) gets its default once the ranks have agreed whether
		// their links stream (agreeEager).
		if c.stagedMax == 0 {
			c.stagedMax = math.MaxInt
		}
		if c.stagingBytes == 0 {
			c.stagingBytes = shm.StagingBytesFor(cfg.WorldSize)
		}
	}
	c.initOpCtx()
	log, err := newLogger(cfg, c.rank)
	if err != nil {
		// Tell the peers, as a failed wiring does, so that they stop waiting at once.
		c.log = slog.New(slog.DiscardHandler)
		err = c.postAbort(ctx, err)
		c.release()
		return nil, err
	}
	c.log = log
	c.traceLog = c.log.Enabled(context.Background(), LevelTrace)
	if err := c.wire(ctx); err != nil {
		c.release()
		return nil, err
	}
	if err := c.agreeEager(ctx); err != nil { // before tracing: it is not the user's
		c.release()
		return nil, err
	}
	if err := c.startTrace(); err != nil {
		c.release()
		return nil, err
	}
	registerLive(c)
	go c.loop()
	go c.watchdog()
	c.log.Info("goccl init done", "subsys", "INIT", "version", Version, "comm", c.id, "config", cfg.String())
	return c, nil
}

// wire publishes this rank, reads every peer, and connects the links. A rank whose
// wiring fails tells the others through the store, so they stop waiting at once.
func (c *Comm) wire(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		if msg, err := c.store.Get(ctx, "init/abort"); err == nil {
			cancel(initAbortErr(msg))
		}
	}()
	err := c.wireLinks(ctx)
	if err == nil {
		return nil
	}
	return c.postAbort(ctx, err)
}

// abortPostTimeout bounds posting (or reading) init/abort after a failed Init.
const abortPostTimeout = 2 * time.Second

// postAbort posts this rank's Init failure as init/abort unless another rank's came
// first, and returns the error Init reports. Only the first failure is posted (an Add
// on init/aborts decides which): a later one is most often a consequence of it, such as
// a dial reset by the rank that gave up, and must not replace the cause, with its
// sentinel (ErrAuth stays ErrAuth), that the other ranks read. A rank that fails second
// without having read the first failure yet reports both.
func (c *Comm) postAbort(ctx context.Context, err error) error {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortPostTimeout)
	defer cancel()
	n, aerr := c.store.Add(pctx, "init/aborts", 1)
	if aerr != nil || n == 1 {
		c.store.Set(pctx, "init/abort", []byte(fmt.Sprintf("%d rank %d: %v", abortCode(err), c.rank, err)))
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return err // initErr has already named the first failure
	}
	msg, gerr := c.store.Get(pctx, "init/abort")
	if gerr != nil {
		return err
	}
	return fmt.Errorf("goccl: rank %d: init aborted: %w (and on this rank: %w)", c.rank, initAbortErr(msg), err)
}

// wireLinks does wire's work.
func (c *Comm) wireLinks(ctx context.Context) error {
	if err := c.claimRank(ctx); err != nil {
		return err
	}
	if err := c.agreeNonce(ctx); err != nil {
		return c.initErr(ctx, err)
	}
	names := c.expandTransports()
	rec := peerRecord{Version: protocolVersion, Rank: c.rank, World: c.size, Host: c.host, Pid: os.Getpid(),
		Algo: c.cfg.Algo, Handles: map[string][]byte{}}
	var notes []string
	var invalid error // a transport refused its settings: the user's mistake, not the host's
	for _, name := range names {
		ep, err := c.openEndpoint(ctx, name)
		if err != nil {
			note := err.Error()
			if !strings.HasPrefix(note, name+":") {
				note = name + ": " + note
			}
			notes = append(notes, note)
			if invalid == nil && errors.Is(err, transport.ErrInvalid) {
				invalid = err
			}
			c.log.Info("transport unavailable", "subsys", "INIT", "transport", name, "reason", err)
			continue
		}
		c.eps[name] = ep
		c.closers = append(c.closers, ep)
		rec.Handles[name] = ep.Handle()
	}
	if len(c.eps) == 0 && c.size > 1 {
		if invalid != nil {
			return fmt.Errorf("goccl: rank %d: no transport can run here: %w", c.rank, invalid)
		}
		return fmt.Errorf("goccl: rank %d: %w: no transport can run here (%s)", c.rank, transport.ErrNotSupported, strings.Join(notes, "; "))
	}
	b, _ := json.Marshal(rec)
	if err := c.store.Set(ctx, "peer/"+strconv.Itoa(c.rank), b); err != nil {
		return c.initErr(ctx, fmt.Errorf("goccl: rank %d: publish: %w", c.rank, err))
	}
	if err := c.readPeers(ctx); err != nil {
		return c.initErr(ctx, err)
	}
	return c.initErr(ctx, c.connectAll(ctx, names))
}

// initErr prefers the cancellation cause (another rank's failure) over a bare ctx error.
func (c *Comm) initErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		if errors.Is(err, transport.ErrInvalid) && !errors.Is(cause, transport.ErrInvalid) {
			// This rank's own finding, not a consequence of the abort: the user's
			// settings, which they must see whichever rank aborted first.
			return fmt.Errorf("goccl: rank %d: init aborted: %w (and on this rank: %w)", c.rank, cause, err)
		}
		return fmt.Errorf("goccl: rank %d: init aborted: %w", c.rank, cause)
	}
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, transport.ErrTimeout) {
		return fmt.Errorf("%w: %w (init_timeout %v)", transport.ErrTimeout, err, c.cfg.InitTimeout)
	}
	return err
}

// agreeNonce makes the communicator id unique per job: rank 0 draws a random suffix and
// the others read it, so two jobs on one host never share shm segment names or
// handshake ids even when their communicators have the same name.
func (c *Comm) agreeNonce(ctx context.Context) error {
	if c.rank == 0 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("goccl: rank 0: communicator id: %w", err)
		}
		if err := c.store.Set(ctx, "nonce", []byte(hex.EncodeToString(b[:]))); err != nil {
			return fmt.Errorf("goccl: rank 0: publish communicator id: %w", err)
		}
		c.id += "-" + hex.EncodeToString(b[:])
		return nil
	}
	v, err := c.store.Get(ctx, "nonce")
	if err != nil {
		return fmt.Errorf("goccl: rank %d: waiting for rank 0 to join: %w", c.rank, err)
	}
	c.id += "-" + string(v)
	return nil
}

func (c *Comm) claimRank(ctx context.Context) error {
	n, err := c.store.Add(ctx, "claim/"+strconv.Itoa(c.rank), 1)
	if err != nil {
		return c.initErr(ctx, fmt.Errorf("goccl: rank %d: rendezvous: %w", c.rank, err))
	}
	if n > 1 {
		return fmt.Errorf("goccl: %w: rank %d joined communicator %q twice (two processes with the same rank?)", transport.ErrInvalid, c.rank, c.id)
	}
	return nil
}

func (c *Comm) expandTransports() []string {
	var out []string
	for _, t := range c.cfg.Transports {
		if t != "auto" {
			out = append(out, t)
			continue
		}
		for _, a := range autoTransports {
			if _, err := transport.Lookup(a); err == nil {
				out = append(out, a)
			}
		}
	}
	return slices.Compact(out)
}

func (c *Comm) openEndpoint(ctx context.Context, name string) (transport.Endpoint, error) {
	tr, err := transport.Lookup(name)
	if err != nil {
		return nil, err
	}
	params := transport.Params{}
	for k, v := range c.cfg.Params {
		params[k] = v
	}
	params["local_rank"] = strconv.Itoa(c.localRank)
	params["local_world_size"] = strconv.Itoa(c.cfg.LocalWorldSize)
	return tr.Open(ctx, transport.Local{
		CommID: c.id, Rank: c.rank, World: c.size, Host: c.host,
		Store:   rendezvous.WithPrefix(c.store, name),
		Timeout: c.cfg.InitTimeout, AuthToken: []byte(c.cfg.AuthToken),
		Params: params, Logger: c.log.With("subsys", "TRANSPORT", "transport", name),
	})
}

func (c *Comm) readPeers(ctx context.Context) error {
	c.peers = make([]peerRecord, c.size)
	for r := range c.size {
		b, err := c.store.Get(ctx, "peer/"+strconv.Itoa(r))
		if err != nil {
			return fmt.Errorf("goccl: rank %d: waiting for rank %d to join: %w", c.rank, r, err)
		}
		var p peerRecord
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("goccl: rank %d: %w: record of rank %d: %v", c.rank, transport.ErrProtocol, r, err)
		}
		switch {
		case p.Version != protocolVersion:
			return fmt.Errorf("goccl: %w: rank %d speaks protocol %d, rank %d speaks %d (mixed goccl versions)",
				transport.ErrMismatch, r, p.Version, c.rank, protocolVersion)
		case p.World != c.size:
			return fmt.Errorf("goccl: %w: rank %d says the world size is %d but rank %d says %d",
				transport.ErrMismatch, r, p.World, c.rank, c.size)
		case p.Rank != r:
			return fmt.Errorf("goccl: %w: record for rank %d claims rank %d", transport.ErrProtocol, r, p.Rank)
		case p.Algo != c.cfg.Algo:
			return fmt.Errorf("goccl: %w: rank %d uses algo %q but rank %d uses %q (configure every rank alike)",
				transport.ErrMismatch, r, p.Algo, c.rank, c.cfg.Algo)
		}
		c.peers[r] = p
	}
	return nil
}

// initAbortErr rebuilds another rank's Init failure from its init/abort message
// ("<code> rank N: ..."), keeping its sentinel so errors.Is works on every rank.
func initAbortErr(msg []byte) error {
	code, rest, _ := strings.Cut(string(msg), " ")
	n, err := strconv.ParseUint(code, 10, 64)
	sentinel, ok := abortErrs[n]
	if err != nil || !ok {
		return fmt.Errorf("goccl: %w: %s", transport.ErrPeer, msg)
	}
	if sentinel != transport.ErrPeer {
		return fmt.Errorf("goccl: %w: %w: %s", transport.ErrPeer, sentinel, rest)
	}
	return fmt.Errorf("goccl: %w: %s", transport.ErrPeer, rest)
}
