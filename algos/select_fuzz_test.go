package algos_test

import (
	"errors"
	"testing"

	"github.com/goccl/goccl/algos"
	"github.com/goccl/goccl/transport"
)

// FuzzParseSpec: a spec either parses, and then its canonical form parses to the
// same canonical form and resolves every collective at every size to a registered
// algorithm or to auto, or it is refused with an error wrapping ErrInvalid.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"auto", "ring", "allreduce:ring,broadcast:tree", "tree<64K,ring;allgather:naive<4K,ring",
		"allreduce:tree<64K,ring<64M,auto", "ring<0", "tree<1.5K,ring", "allreduce:ring;allreduce:tree", ";", "a:b:c", "ring<", "<4K"} {
		f.Add(s)
	}
	kinds := []transport.Kind{transport.KindAllReduce, transport.KindBroadcast, transport.KindAllGather, transport.KindReduceScatter,
		transport.KindReduce, transport.KindAllToAll, transport.KindBarrier, transport.KindGather, transport.KindScatter}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := algos.ParseSpec(s)
		if err != nil {
			if !errors.Is(err, transport.ErrInvalid) {
				t.Fatalf("ParseSpec(%q): error %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		canon := sp.String()
		again, err := algos.ParseSpec(canon)
		if err != nil {
			t.Fatalf("ParseSpec(%q) = %q, which does not parse: %v", s, canon, err)
		}
		if again.String() != canon {
			t.Fatalf("ParseSpec(%q) = %q, which reads back as %q", s, canon, again.String())
		}
		for _, k := range kinds {
			for _, n := range []int{0, 1, 4095, 4096, 64 << 10, 1 << 30, 1 << 50} {
				a, why, err := sp.Resolve(k, n, 4, algos.TCPModel)
				if err != nil || a == nil || why == "" {
					t.Fatalf("ParseSpec(%q) resolves %v at %d bytes to %v, %q, %v", s, k, n, a, why, err)
				}
			}
		}
	})
}
