package goccl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

// fileConfig is the shape of a GOCCL_CONFIG file (YAML, or JSON, which YAML accepts).
// Keys match the GOCCL_* variables without the prefix, lower case.
type fileConfig struct {
	Rank           *int              `yaml:"rank"`
	WorldSize      *int              `yaml:"world_size"`
	LocalRank      *int              `yaml:"local_rank"`
	LocalWorldSize *int              `yaml:"local_world_size"`
	Store          *string           `yaml:"store"`
	Transport      any               `yaml:"transport"` // "shm,tcp" or a list
	Algo           *string           `yaml:"algo"`
	ChunkBytes     *string           `yaml:"chunk_bytes"`
	SocketsPerPeer *int              `yaml:"sockets_per_peer"`
	Timeout        *string           `yaml:"timeout"`
	InitTimeout    *string           `yaml:"init_timeout"`
	AuthToken      *string           `yaml:"auth_token"`
	Host           *string           `yaml:"host"`
	Name           *string           `yaml:"name"`
	Params         map[string]string `yaml:"params"`
	Debug          *string           `yaml:"debug"`
	DebugSubsys    *string           `yaml:"debug_subsys"`
	DebugFile      *string           `yaml:"debug_file"`
	Trace          *string           `yaml:"trace"`
	TuneFile       *string           `yaml:"tune_file"`
	AlgoTune       *string           `yaml:"algo_tune"`
}

// FromEnv builds a Config from the defaults, the file named by GOCCL_CONFIG, the
// environment (GOCCL_* plus the launcher variables of goccl run, torchrun, Open MPI,
// Slurm and PMI), and then opts. Errors are kept in the Config; Init reports them.
func FromEnv(opts ...Option) Config {
	c, err := LoadConfig(os.Getenv)
	c = c.Apply(opts...)
	if err != nil && c.err == nil {
		c.err = err
	}
	return c
}

// LoadConfig is FromEnv without options, reading variables through getenv.
func LoadConfig(getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	if path := getenv("GOCCL_CONFIG"); path != "" {
		if err := c.loadFile(path); err != nil {
			c.err = err
			return c, err
		}
	}
	if err := c.loadEnv(getenv); err != nil {
		c.err = err
		return c, err
	}
	return c, nil
}

// LoadFile applies a YAML or JSON config file on top of c.
func (c *Config) loadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("goccl: config file: %w", err)
	}
	var f fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("goccl: config file %s: %w: %v (valid keys: %s)", path, transport.ErrInvalid, err, strings.Join(configKeys, ", "))
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	seti := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	seti(&c.Rank, f.Rank)
	seti(&c.WorldSize, f.WorldSize)
	seti(&c.LocalRank, f.LocalRank)
	seti(&c.LocalWorldSize, f.LocalWorldSize)
	if f.Rank != nil || f.WorldSize != nil {
		c.source = "config file"
	}
	set(&c.Store, f.Store)
	set(&c.Algo, f.Algo)
	set(&c.AuthToken, f.AuthToken)
	set(&c.Host, f.Host)
	set(&c.Name, f.Name)
	set(&c.Debug, f.Debug)
	set(&c.DebugSubsys, f.DebugSubsys)
	set(&c.DebugFile, f.DebugFile)
	set(&c.TraceDir, f.Trace)
	set(&c.TuneFile, f.TuneFile)
	set(&c.AlgoTune, f.AlgoTune)
	switch t := f.Transport.(type) {
	case nil:
	case string:
		c.Transports = splitList(t)
	case []any:
		c.Transports = nil
		for _, x := range t {
			c.Transports = append(c.Transports, fmt.Sprint(x))
		}
	default:
		return fmt.Errorf("goccl: config file %s: %w: transport must be a string or a list, got %T", path, transport.ErrInvalid, t)
	}
	fields := []struct {
		key string
		val *string
		fn  func(string) error
	}{
		{"chunk_bytes", f.ChunkBytes, func(s string) (err error) { c.ChunkBytes, err = transport.ParseBytes(s); return }},
		{"timeout", f.Timeout, func(s string) (err error) { c.Timeout, err = parseDuration(s); return }},
		{"init_timeout", f.InitTimeout, func(s string) (err error) { c.InitTimeout, err = parseDuration(s); return }},
	}
	for _, fl := range fields {
		if fl.val != nil {
			if err := fl.fn(*fl.val); err != nil {
				return fmt.Errorf("goccl: config file %s: %w: %s: %v", path, transport.ErrInvalid, fl.key, err)
			}
		}
	}
	if f.SocketsPerPeer != nil {
		c.Params["tcp.sockets"] = strconv.Itoa(*f.SocketsPerPeer)
	}
	for k, v := range f.Params {
		c.Params[k] = v
	}
	return nil
}

// configKeys are the file keys; each is also GOCCL_<KEY upper-cased>.
var configKeys = []string{"rank", "world_size", "local_rank", "local_world_size", "store", "transport",
	"algo", "chunk_bytes", "sockets_per_peer", "timeout", "init_timeout", "auth_token", "host", "name",
	"params", "debug", "debug_subsys", "debug_file", "trace", "tune_file", "algo_tune"}

// paramPrefixes are the transports whose GOCCL_<T>_<NAME> variables become Params "<t>.<name>".
var paramPrefixes = []string{"TCP", "SHM", "RDMA", "NCCL", "CUDA", "INMEM"}

func (c *Config) loadEnv(getenv func(string) string) error {
	l, err := rendezvous.DiscoverEnv(getenv)
	if err != nil {
		return fmt.Errorf("goccl: launcher environment: %w", err)
	}
	if l.Source != "" {
		c.Rank, c.WorldSize, c.source = l.Rank, l.World, l.Source
		if l.LocalRank >= 0 {
			c.LocalRank = l.LocalRank
		}
		if l.LocalWorld > 0 {
			c.LocalWorldSize = l.LocalWorld
		}
	}
	if l.StoreAddr != "" {
		c.Store = l.StoreAddr
	}
	str := map[string]*string{
		"GOCCL_ALGO": &c.Algo, "GOCCL_AUTH_TOKEN": &c.AuthToken, "GOCCL_HOST_ID": &c.Host,
		"GOCCL_HOST": &c.Host, "GOCCL_NAME": &c.Name, "GOCCL_DEBUG": &c.Debug,
		"GOCCL_DEBUG_SUBSYS": &c.DebugSubsys, "GOCCL_DEBUG_FILE": &c.DebugFile, "GOCCL_TRACE": &c.TraceDir,
		"GOCCL_TUNE_FILE": &c.TuneFile, "GOCCL_ALGO_TUNE": &c.AlgoTune,
	}
	for k, dst := range str {
		if v := getenv(k); v != "" {
			*dst = v
		}
	}
	if v := getenv("GOCCL_TRANSPORT"); v != "" {
		c.Transports = splitList(v)
	}
	parsers := []struct {
		key string
		fn  func(string) error
	}{
		{"GOCCL_CHUNK_BYTES", func(s string) (err error) { c.ChunkBytes, err = transport.ParseBytes(s); return }},
		{"GOCCL_TIMEOUT", func(s string) (err error) { c.Timeout, err = parseDuration(s); return }},
		{"GOCCL_INIT_TIMEOUT", func(s string) (err error) { c.InitTimeout, err = parseDuration(s); return }},
		{"GOCCL_SOCKETS_PER_PEER", func(s string) error {
			n, err := strconv.Atoi(s)
			if err == nil && n < 1 {
				err = errors.New("must be at least 1")
			}
			c.Params["tcp.sockets"] = s
			return err
		}},
	}
	for _, p := range parsers {
		if v := getenv(p.key); v != "" {
			if err := p.fn(v); err != nil {
				return fmt.Errorf("goccl: %w: %s=%q: %v", transport.ErrInvalid, p.key, v, err)
			}
		}
	}
	if v := getenv("GOCCL_PARAMS"); v != "" {
		for _, kv := range splitList(v) {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("goccl: %w: GOCCL_PARAMS entry %q is not key=value", transport.ErrInvalid, kv)
			}
			c.Params[k] = val
		}
	}
	for _, kv := range environ() {
		k, v, _ := strings.Cut(kv, "=")
		for _, p := range paramPrefixes {
			if rest, ok := strings.CutPrefix(k, "GOCCL_"+p+"_"); ok && rest != "" && getenv(k) == v {
				c.Params[strings.ToLower(p)+"."+strings.ToLower(rest)] = v
			}
		}
	}
	return nil
}

// environ is a variable so tests can control it alongside getenv.
var environ = os.Environ

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// maxTimeout bounds a timeout setting: far beyond any run, far below time.Duration's
// overflow (292 years).
const maxTimeout = 100 * 365 * 24 * time.Hour

// parseDuration accepts Go durations ("90s", "1m30s") and plain seconds ("90",
// "2.5"), the same in the config file and the environment, and refuses anything
// that is not a positive time of at most maxTimeout (time.ParseDuration refuses
// exponents, NaN, Inf and values past its range, so nothing wraps round).
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil && s != "" && strings.ContainsRune("0123456789.", rune(s[len(s)-1])) {
		d, err = time.ParseDuration(s + "s")
	}
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (want e.g. 90s, 1m30s, 500ms, or seconds such as 90)", s)
	}
	if d <= 0 || d > maxTimeout {
		return 0, fmt.Errorf("%q: want a duration above 0 and at most %v", s, maxTimeout)
	}
	return d, nil
}
