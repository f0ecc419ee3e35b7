package goccl

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/goccl/goccl/transport"
)

// fuzzVars are the variables FuzzConfig sets; the fuzzer picks one and its value.
var fuzzVars = []string{"GOCCL_TIMEOUT", "GOCCL_INIT_TIMEOUT", "GOCCL_CHUNK_BYTES", "GOCCL_SOCKETS_PER_PEER",
	"GOCCL_PARAMS", "GOCCL_TRANSPORT", "GOCCL_ALGO", "GOCCL_RANK", "GOCCL_WORLD_SIZE", "GOCCL_LOCAL_RANK",
	"GOCCL_STORE", "MASTER_PORT", "SLURM_NTASKS_PER_NODE", "GOCCL_DEBUG"}

// FuzzConfig feeds an arbitrary config file and one arbitrary variable to LoadConfig
// and the checks Init makes before it connects: either is an error wrapping
// ErrInvalid (or, for a file yaml cannot read, naming the valid keys), never a panic;
// and whatever passes has positive timeouts and a rank inside its world.
func FuzzConfig(f *testing.F) {
	f.Add([]byte("algo: tree\ntransport: [shm, tcp]\ntimeout: 30s\nchunk_bytes: 1M\nparams:\n  tcp.sockets: \"3\"\n"), uint8(0), "90")
	f.Add([]byte(`{"algo": "ring", "transport": "tcp,shm", "rank": 1, "world_size": 3}`), uint8(4), "shm.spin=10us,tcp.bufsize=4M")
	f.Add([]byte("timeout: 90\nsockets_per_peer: 0\n"), uint8(2), "1.5M")
	f.Add([]byte("transport: {a: 1}\n"), uint8(6), "allreduce:tree<64K,ring")
	f.Add([]byte(""), uint8(7), "3")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, file []byte, which uint8, val string) {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		key := fuzzVars[int(which)%len(fuzzVars)]
		env := map[string]string{"GOCCL_CONFIG": path, key: val}
		c, err := LoadConfig(envOf(env))
		if err != nil {
			if !errors.Is(err, transport.ErrInvalid) && !strings.Contains(err.Error(), "config file") {
				t.Fatalf("%s=%q with file %q: error %v neither wraps ErrInvalid nor names the file", key, val, file, err)
			}
			return
		}
		_ = c.String()
		if err := c.validate(); err != nil {
			if !errors.Is(err, transport.ErrInvalid) {
				t.Fatalf("%s=%q with file %q: validate: %v does not wrap ErrInvalid", key, val, file, err)
			}
			return
		}
		if c.Timeout <= 0 || c.InitTimeout <= 0 || c.Rank < 0 || c.Rank >= c.WorldSize || len(c.Transports) == 0 {
			t.Fatalf("%s=%q with file %q passed validation as %s", key, val, file, c.String())
		}
	})
}

// FuzzCheckParams: two arbitrary parameters either pass every registered transport's
// check, or are refused with an error wrapping ErrInvalid that quotes a key; never a
// panic.
func FuzzCheckParams(f *testing.F) {
	f.Add("tcp.sockets", "4", "shm.ring_bytes", "64K")
	f.Add("shm.chunk_bytes", "1M", "shm.ring_bytes", "1M")
	f.Add("nccl.min_ctas", "8", "nccl.max_ctas", "4")
	f.Add("rdma.hca", "^mlx5_0:1,mlx5_1", "rdma.chunk_bytes", "64K")
	f.Add("shm.staged_max", "none", "shm.spin", "1s")
	f.Add("tpc.sockets", "4", "local_rank", "x")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		err := transport.CheckParams(transport.Params{k1: v1, k2: v2})
		if err == nil {
			return
		}
		if !errors.Is(err, transport.ErrInvalid) {
			t.Fatalf("{%q: %q, %q: %q}: %v does not wrap ErrInvalid", k1, v1, k2, v2, err)
		}
		names := func(k string) bool {
			return strings.Contains(err.Error(), k) || strings.Contains(err.Error(), strconv.Quote(k))
		}
		if !names(k1) && !names(k2) {
			t.Fatalf("{%q: %q, %q: %q}: %v names neither key", k1, v1, k2, v2, err)
		}
	})
}
