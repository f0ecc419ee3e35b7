package nccl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goccl/goccl/transport"
)

// paramKeys are the keys the nccl transport and the CUDA loaders read. The "cuda.",
// "nvrtc." and "cublas." keys name libraries (dp/cuda reads the last two).
var paramKeys = []string{"nccl.lib", "nccl.device", "nccl.p2p_buffer", "nccl.blocking", "nccl.cga_cluster_size",
	"nccl.min_ctas", "nccl.max_ctas", "nccl.split_share", "nccl.net_name",
	"cuda.lib", "cuda.driver", "cuda.nvrtc", "cuda.cublas", "nvrtc.lib", "cublas.lib"}

// ParamPrefixes: nccl owns the "nccl." keys and the library paths of the CUDA
// loaders (transport.ParamChecker).
func (Transport) ParamPrefixes() []string { return []string{"nccl.", "cuda.", "nvrtc.", "cublas."} }

// CheckParams refuses an unknown key under those prefixes and an integer setting
// that is not one, or out of the range ncclConfig_t takes, so that a typo is not
// quietly NCCL's default.
func (Transport) CheckParams(p transport.Params) error {
	for _, pre := range (Transport{}).ParamPrefixes() {
		if k := transport.UnknownParam(p, pre, paramKeys); k != "" {
			return fmt.Errorf("nccl: %w: unknown parameter %q (valid: %s)", transport.ErrInvalid, k, strings.Join(paramKeys, ", "))
		}
	}
	ints := []struct {
		key    string
		lo, hi int
	}{
		{"nccl.device", 0, 1 << 16},
		{"nccl.blocking", 0, 1},
		{"nccl.split_share", 0, 1},
		{"nccl.cga_cluster_size", 0, 8},
		{"nccl.min_ctas", 1, 1 << 16},
		{"nccl.max_ctas", 1, 1 << 16},
	}
	got := map[string]int{}
	for _, f := range ints {
		v, ok := p[f.key]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < f.lo || n > f.hi {
			return fmt.Errorf("nccl: %w: %s=%q, want an integer in [%d, %d]", transport.ErrInvalid, f.key, v, f.lo, f.hi)
		}
		got[f.key] = n
	}
	lo, okLo := got["nccl.min_ctas"]
	hi, okHi := got["nccl.max_ctas"]
	if okLo && okHi && lo > hi {
		return fmt.Errorf("nccl: %w: nccl.min_ctas=%d exceeds nccl.max_ctas=%d", transport.ErrInvalid, lo, hi)
	}
	if v, ok := p["nccl.p2p_buffer"]; ok && v != "device" && v != "pinned" {
		return fmt.Errorf("nccl: %w: nccl.p2p_buffer=%q (valid: device, pinned)", transport.ErrInvalid, v)
	}
	return nil
}
