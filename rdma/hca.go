package rdma

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goccl/goccl/transport"
)

// HCAFilter selects devices and ports the way NCCL_IB_HCA does: a comma-separated list
// of "name" or "name:port" entries; a leading "^" excludes the listed devices instead of
// selecting them; a leading "=" matches names exactly (otherwise an entry is a prefix,
// so "mlx5" matches mlx5_0 and mlx5_1). "^=" combines both. The zero value selects
// everything.
type HCAFilter struct {
	Exclude bool
	Exact   bool
	Entries []HCAEntry
}

// HCAEntry is one device (and optionally one port, from 1) in an HCAFilter.
type HCAEntry struct {
	Name string
	Port int // 0 = every port
}

// ParseHCA parses an NCCL_IB_HCA-style list such as "mlx5_0:1,mlx5_1", "^mlx5_2" or
// "=mlx5_0". An empty string selects every device.
func ParseHCA(s string) (HCAFilter, error) {
	var f HCAFilter
	orig := s
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "^") {
		f.Exclude, s = true, s[1:]
	}
	if strings.HasPrefix(s, "=") {
		f.Exact, s = true, s[1:]
	}
	if strings.TrimSpace(s) == "" {
		if f.Exclude || f.Exact {
			return HCAFilter{}, fmt.Errorf("%w: HCA list %q has a prefix but no device names (want e.g. \"^mlx5_0\" or \"=mlx5_0:1\")", transport.ErrInvalid, orig)
		}
		return f, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, port, hasPort := strings.Cut(item, ":")
		if name == "" || strings.ContainsAny(name, "^=: /") {
			return HCAFilter{}, fmt.Errorf("%w: bad device %q in HCA list (want name or name:port, e.g. mlx5_0:1)", transport.ErrInvalid, item)
		}
		e := HCAEntry{Name: name}
		if hasPort {
			n, err := strconv.Atoi(port)
			if err != nil || n < 1 || n > 255 {
				return HCAFilter{}, fmt.Errorf("%w: bad port %q for device %s in HCA list (ports are numbered 1..255)", transport.ErrInvalid, port, name)
			}
			e.Port = n
		}
		f.Entries = append(f.Entries, e)
	}
	return f, nil
}

// Match reports whether port of device passes the filter.
func (f HCAFilter) Match(device string, port int) bool {
	if len(f.Entries) == 0 {
		return true
	}
	hit := false
	for _, e := range f.Entries {
		nameOK := device == e.Name || (!f.Exact && strings.HasPrefix(device, e.Name))
		if nameOK && (e.Port == 0 || e.Port == port) {
			hit = true
			break
		}
	}
	return hit != f.Exclude
}

// String formats the filter back into NCCL_IB_HCA syntax.
func (f HCAFilter) String() string {
	var b strings.Builder
	if f.Exclude {
		b.WriteByte('^')
	}
	if f.Exact {
		b.WriteByte('=')
	}
	for i, e := range f.Entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.Name)
		if e.Port > 0 {
			fmt.Fprintf(&b, ":%d", e.Port)
		}
	}
	return b.String()
}
