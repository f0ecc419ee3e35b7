package goccl

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/goccl/goccl/transport"
)

// Config is everything a communicator needs. The same fields come from Go options,
// GOCCL_* environment variables and a YAML/JSON file; FromEnv applies them with the
// precedence options > env > file > defaults. The zero value is not valid: start from
// DefaultConfig or FromEnv.
type Config struct {
	// Rank and WorldSize place this process in the job; -1 means unset.
	Rank, WorldSize int
	// LocalRank and LocalWorldSize place it on its host (-1: unknown).
	LocalRank, LocalWorldSize int
	// Store is the rendezvous: "host:port" of a TCP store (rank 0 serves it when nobody
	// else does), or "file:/shared/dir" for a FileStore.
	Store string
	// StoreClient, when set, is used instead of Store (goroutine ranks share a MemStore).
	StoreClient transport.Store
	// Transports is the ordered list to try per peer pair: "auto", "shm", "tcp", "rdma",
	// "nccl", "inmem". The first that can connect wins; "auto" expands to shm, rdma, tcp.
	Transports []string
	// Algo chooses algorithms: "auto", "ring", "tree", "naive", "nccl", or per collective
	// ("allreduce:ring,broadcast:tree"); see package algos for the full syntax.
	Algo string
	// ChunkBytes is the pipelining unit of the algorithms (0 = their default).
	ChunkBytes int
	// Timeout bounds every collective whose context has no earlier deadline.
	Timeout time.Duration
	// InitTimeout bounds Init: reaching the store and connecting to every peer.
	InitTimeout time.Duration
	// AuthToken, when set, makes the store and every link prove the peer holds it
	// (HMAC challenge). It never appears in String or logs.
	AuthToken string
	// Host overrides this rank's host identity (ranks with equal identities may use shm).
	Host string
	// Name distinguishes communicators that share a store (default "world").
	Name string
	// Params holds transport-specific settings: "tcp.sockets", "shm.single_copy", ...
	Params map[string]string
	// Debug is the log level: "" (WARN), "ERROR", "WARN", "INFO", "DEBUG" or "TRACE".
	Debug string
	// DebugSubsys filters log lines by subsystem: a list of INIT, COLL, TRANSPORT, ALL,
	// or "^" and a list to exclude ("INIT,COLL" or "^TRANSPORT").
	DebugSubsys string
	// DebugFile sends logs to a file; %h is replaced by the host name, %p by the pid.
	DebugFile string
	// TraceDir, when set, writes a per-rank Chrome trace of every collective there.
	TraceDir string
	// TuneFile is a cost-model file written by `goccl tune`; auto then uses the
	// calibrated alpha/beta of each transport it covers ("" = the built-in models).
	TuneFile string
	// AlgoTune is how auto chooses an AllReduce's algorithm: "model" (or "", the default)
	// runs the cost model's choice; "online" also times the candidates (the model's
	// choice, its fastest, the ring, naive, rd and staged where it prices them within
	// 1.3x of that, and beside staged the fastest of the others) on the communicator's
	// own calls of 64 KiB and more, per power-of-two size class, and runs the fastest,
	// which the ranks agree on (algotune.go). It takes effect only when every rank's
	// config sets it.
	AlgoTune string

	source string // where rank and world came from, for String
	err    error  // the first error met while building the config; Init returns it
}

// Default values, chosen so a job on one host works with no configuration.
const (
	// DefaultTimeout matches PyTorch's process-group default (10 minutes): long enough for
	// a slow first collective on a big model, short enough that a stuck job ends.
	DefaultTimeout = 10 * time.Minute
	// DefaultInitTimeout bounds rendezvous; launchers start ranks within seconds, so two
	// minutes covers slow schedulers without hiding an unreachable store for long.
	DefaultInitTimeout = 2 * time.Minute
)

// DefaultConfig returns the defaults: auto transport and algorithm, ranks unset.
func DefaultConfig() Config {
	return Config{
		Rank: -1, WorldSize: -1, LocalRank: -1, LocalWorldSize: -1,
		Transports:  []string{"auto"},
		Algo:        "auto",
		Timeout:     DefaultTimeout,
		InitTimeout: DefaultInitTimeout,
		Name:        "world",
		Params:      map[string]string{},
	}
}

// Option changes one field of a Config; options apply after the file and environment.
type Option func(*Config)

// WithRank sets this process's rank and the world size.
func WithRank(rank, world int) Option {
	return func(c *Config) { c.Rank, c.WorldSize, c.source = rank, world, "options" }
}

// WithLocalRank sets the rank's position on its host.
func WithLocalRank(localRank, localWorld int) Option {
	return func(c *Config) { c.LocalRank, c.LocalWorldSize = localRank, localWorld }
}

// WithStore uses s for rendezvous instead of dialing Config.Store.
func WithStore(s transport.Store) Option { return func(c *Config) { c.StoreClient = s } }

// WithStoreAddr sets the rendezvous address ("host:port" or "file:/dir").
func WithStoreAddr(addr string) Option { return func(c *Config) { c.Store = addr } }

// WithTransport sets the ordered transport list.
func WithTransport(names ...string) Option {
	return func(c *Config) { c.Transports = slices.Clone(names) }
}

// WithAlgo sets the algorithm spec ("ring", "allreduce:tree,broadcast:ring", ...).
func WithAlgo(spec string) Option { return func(c *Config) { c.Algo = spec } }

// WithTimeout sets the default bound for each collective.
func WithTimeout(d time.Duration) Option { return func(c *Config) { c.Timeout = d } }

// WithInitTimeout sets the bound for Init.
func WithInitTimeout(d time.Duration) Option { return func(c *Config) { c.InitTimeout = d } }

// WithChunkBytes sets the algorithms' pipelining unit.
func WithChunkBytes(n int) Option { return func(c *Config) { c.ChunkBytes = n } }

// WithAuthToken requires peers and the store to prove they hold token.
func WithAuthToken(token string) Option { return func(c *Config) { c.AuthToken = token } }

// WithHost sets the host identity.
func WithHost(id string) Option { return func(c *Config) { c.Host = id } }

// WithName names the communicator (distinct names may share one store).
func WithName(name string) Option { return func(c *Config) { c.Name = name } }

// WithParam sets one transport-specific parameter ("tcp.sockets", "4").
func WithParam(key, value string) Option {
	return func(c *Config) {
		if c.Params == nil {
			c.Params = map[string]string{}
		}
		c.Params[key] = value
	}
}

// WithDebug sets the log level and subsystem filter (see GOCCL_DEBUG).
func WithDebug(level, subsys string) Option {
	return func(c *Config) { c.Debug, c.DebugSubsys = level, subsys }
}

// Apply returns a copy of c with opts applied.
func (c Config) Apply(opts ...Option) Config {
	c.Params = maps.Clone(c.Params)
	c.Transports = slices.Clone(c.Transports)
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Err is the first error met while reading the file or environment (Init returns it too).
func (c Config) Err() error { return c.err }

// String prints the effective config, one "key=value" per field, with the token redacted.
func (c Config) String() string {
	var b strings.Builder
	kv := func(k string, v any) { fmt.Fprintf(&b, "%s=%v ", k, v) }
	kv("rank", c.Rank)
	kv("world_size", c.WorldSize)
	kv("local_rank", c.LocalRank)
	kv("local_world_size", c.LocalWorldSize)
	if c.source != "" {
		kv("launcher", c.source)
	}
	switch {
	case c.StoreClient != nil:
		kv("store", fmt.Sprintf("%T", c.StoreClient))
	case c.Store != "":
		kv("store", c.Store)
	}
	kv("transport", strings.Join(c.Transports, ","))
	kv("algo", c.Algo)
	if c.ChunkBytes > 0 {
		kv("chunk_bytes", c.ChunkBytes)
	}
	kv("timeout", c.Timeout)
	kv("init_timeout", c.InitTimeout)
	if c.AuthToken != "" {
		kv("auth_token", "<redacted>")
	}
	if c.Host != "" {
		kv("host", c.Host)
	}
	kv("name", c.Name)
	for _, k := range slices.Sorted(maps.Keys(c.Params)) {
		kv(k, c.Params[k])
	}
	if c.Debug != "" {
		kv("debug", c.Debug)
	}
	if c.DebugSubsys != "" {
		kv("debug_subsys", c.DebugSubsys)
	}
	if c.TraceDir != "" {
		kv("trace", c.TraceDir)
	}
	if c.TuneFile != "" {
		kv("tune_file", c.TuneFile)
	}
	if c.AlgoTune != "" {
		kv("algo_tune", c.AlgoTune)
	}
	return strings.TrimSpace(b.String())
}

// WithTrace writes a per-rank Chrome trace of every collective into dir.
func WithTrace(dir string) Option { return func(c *Config) { c.TraceDir = dir } }

// WithDebugFile sends the rank's log to a file (%h = host, %p = pid).
func WithDebugFile(path string) Option { return func(c *Config) { c.DebugFile = path } }

// WithTuneFile makes auto use the cost models `goccl tune` wrote to path.
func WithTuneFile(path string) Option { return func(c *Config) { c.TuneFile = path } }

// WithAlgoTune sets how auto chooses an AllReduce's algorithm: AlgoTuneModel or
// AlgoTuneOnline (Config.AlgoTune).
func WithAlgoTune(mode string) Option { return func(c *Config) { c.AlgoTune = mode } }
