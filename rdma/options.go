package rdma

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goccl/goccl/transport"
)

// The Params keys this transport reads.
const (
	ParamHCA        = "rdma.hca"          // NCCL_IB_HCA syntax, see ParseHCA
	ParamGIDIndex   = "rdma.gid_index"    // RoCE GID index; -1 = pick a RoCE v2 IPv4 entry
	ParamQPsPerPeer = "rdma.qps_per_peer" // RC QPs per direction per peer (NCCL_IB_QPS_PER_CONNECTION)
	ParamProvider   = "rdma.provider"     // "auto" | "verbs" | "soft"
	ParamChunkBytes = "rdma.chunk_bytes"  // size of one receive slot (one RDMA write)
	ParamCredits    = "rdma.credits"      // receive slots per direction (outstanding writes)
)

// Providers are the valid values of rdma.provider.
var Providers = []string{"auto", "verbs", "soft"}

// Options is the transport's configuration, parsed from transport.Params.
type Options struct {
	HCA        HCAFilter
	GIDIndex   int
	QPsPerPeer int
	Provider   string
	ChunkBytes int
	Credits    int
}

// Limits on the options: the immediate carries a slot index in 24 bits, and a chunk
// must hold a frame header.
const (
	minChunk   = 4096
	maxChunk   = 64 << 20
	maxCredits = 1024
	maxQPs     = 16
)

// DefaultOptions is what an empty Params means.
func DefaultOptions() Options {
	return Options{GIDIndex: -1, QPsPerPeer: 1, Provider: "auto", ChunkBytes: 256 << 10, Credits: 8}
}

// ParseOptions reads the rdma.* keys of p; an unknown rdma.* key or a bad value is an
// error naming the key and what would be valid.
func ParseOptions(p transport.Params) (Options, error) {
	o := DefaultOptions()
	known := map[string]bool{ParamHCA: true, ParamGIDIndex: true, ParamQPsPerPeer: true,
		ParamProvider: true, ParamChunkBytes: true, ParamCredits: true}
	for k := range p {
		if strings.HasPrefix(k, "rdma.") && !known[k] {
			return o, fmt.Errorf("rdma: %w: unknown parameter %q (valid: %s, %s, %s, %s, %s, %s)", transport.ErrInvalid, k,
				ParamHCA, ParamGIDIndex, ParamQPsPerPeer, ParamProvider, ParamChunkBytes, ParamCredits)
		}
	}
	var err error
	if o.HCA, err = ParseHCA(p.String(ParamHCA, "")); err != nil {
		return o, fmt.Errorf("rdma: %s=%q: %w", ParamHCA, p[ParamHCA], err)
	}
	// bytes: a byte count spelled as every goccl size is (4096, 64K, 1MiB:
	// transport.ParseBytes); the others are plain integers.
	intParam := func(key string, dst *int, lo, hi int, bytes bool) error {
		v, ok := p[key]
		if !ok {
			return nil
		}
		var n int
		var err error
		if bytes {
			n, err = transport.ParseBytes(v)
		} else {
			n, err = strconv.Atoi(strings.TrimSpace(v))
		}
		if err != nil || n < lo || n > hi {
			what := "an integer"
			if bytes {
				what = "a byte count (4096, 64K, 1MiB)"
			}
			return fmt.Errorf("rdma: %w: %s=%q, want %s in [%d, %d]", transport.ErrInvalid, key, v, what, lo, hi)
		}
		*dst = n
		return nil
	}
	for _, ip := range []struct {
		key    string
		dst    *int
		lo, hi int
		bytes  bool
	}{
		{ParamGIDIndex, &o.GIDIndex, -1, 255, false},
		{ParamQPsPerPeer, &o.QPsPerPeer, 1, maxQPs, false},
		{ParamChunkBytes, &o.ChunkBytes, minChunk, maxChunk, true},
		{ParamCredits, &o.Credits, 1, maxCredits, false},
	} {
		if err := intParam(ip.key, ip.dst, ip.lo, ip.hi, ip.bytes); err != nil {
			return o, err
		}
	}
	o.Provider = strings.ToLower(strings.TrimSpace(p.String(ParamProvider, o.Provider)))
	valid := false
	for _, name := range Providers {
		valid = valid || o.Provider == name
	}
	if !valid {
		return o, fmt.Errorf("rdma: %w: %s=%q (valid: %s)", transport.ErrInvalid, ParamProvider, o.Provider, strings.Join(Providers, ", "))
	}
	return o, nil
}
