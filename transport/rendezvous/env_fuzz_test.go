package rendezvous

import (
	"errors"
	"testing"

	"github.com/goccl/goccl/transport"
)

// envFuzzVars are the variables FuzzDiscoverEnv sets, two at a time.
var envFuzzVars = []string{"GOCCL_RANK", "GOCCL_WORLD_SIZE", "GOCCL_LOCAL_RANK", "GOCCL_LOCAL_WORLD_SIZE", "RANK",
	"WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "GOCCL_STORE",
	"MASTER_ADDR", "MASTER_PORT", "PMI_RANK", "PMI_SIZE"}

// FuzzDiscoverEnv: any values for the launcher variables give either an error
// wrapping ErrInvalid or a launch whose numbers are consistent; never a panic.
func FuzzDiscoverEnv(f *testing.F) {
	f.Add(uint8(0), "1", uint8(1), "4", "")
	f.Add(uint8(7), "3", uint8(8), "8", "2(x4),1")
	f.Add(uint8(11), "host:29500", uint8(12), "29500", "")
	f.Add(uint8(11), "file:", uint8(1), "-1", "")
	f.Fuzz(func(t *testing.T, k1 uint8, v1 string, k2 uint8, v2, local string) {
		env := map[string]string{envFuzzVars[int(k1)%len(envFuzzVars)]: v1, envFuzzVars[int(k2)%len(envFuzzVars)]: v2}
		if local != "" {
			env["SLURM_NTASKS_PER_NODE"] = local
			env["GOCCL_LOCAL_WORLD_SIZE"] = local
		}
		l, err := DiscoverEnv(func(k string) string { return env[k] })
		if err != nil {
			if !errors.Is(err, transport.ErrInvalid) {
				t.Fatalf("%v: %v does not wrap ErrInvalid", env, err)
			}
			return
		}
		if l.Source == "" {
			return
		}
		if l.World < 1 || l.Rank < 0 || l.Rank >= l.World || l.LocalWorld > l.World ||
			l.LocalRank >= l.World || (l.LocalWorld > 0 && l.LocalRank >= l.LocalWorld) {
			t.Fatalf("%v gave an inconsistent launch %+v", env, l)
		}
	})
}
