package rendezvous

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/goccl/goccl/transport"
)

// Launch is what a launcher told this process through its environment.
type Launch struct {
	Rank, World           int    // -1 when no launcher variables are set
	LocalRank, LocalWorld int    // -1 when the launcher does not say
	StoreAddr             string // "host:port" or "file:/path"; "" when not given
	// Source names the launcher whose variables were used: "goccl", "torchrun",
	// "ompi", "slurm", "pmi", or "" when none were set.
	Source string
}

// launcher names one launcher's variables.
type launcher struct {
	source                        string
	rank, world, local, localSize string
}

// launchers in precedence order: goccl's own, then torchrun, Open MPI, Slurm, PMI. The
// first whose rank or world variable is set supplies every field (mixing launchers'
// numbers would pair one launcher's rank with another's world).
var launchers = []launcher{
	{"goccl", "GOCCL_RANK", "GOCCL_WORLD_SIZE", "GOCCL_LOCAL_RANK", "GOCCL_LOCAL_WORLD_SIZE"},
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
	{"ompi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
	{"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
}

// DiscoverEnv reads the launcher variables through getenv (os.Getenv in programs, a map
// in tests). A malformed or out-of-range value is an error naming the variable, its
// value and what is valid; nothing set at all is not an error (Source is "").
func DiscoverEnv(getenv func(string) string) (Launch, error) {
	l := Launch{Rank: -1, World: -1, LocalRank: -1, LocalWorld: -1}
	for _, lc := range launchers {
		rs, ws := strings.TrimSpace(getenv(lc.rank)), strings.TrimSpace(getenv(lc.world))
		if rs == "" && ws == "" {
			continue
		}
		if rs == "" || ws == "" {
			set, missing := lc.rank, lc.world
			if rs == "" {
				set, missing = lc.world, lc.rank
			}
			return l, fmt.Errorf("rendezvous: %w: %s=%q is set but %s is not (%s launch variables need both)",
				transport.ErrInvalid, set, getenv(set), missing, lc.source)
		}
		var err error
		if l.World, err = envInt(lc.world, ws, 1); err != nil {
			return l, err
		}
		if l.Rank, err = envInt(lc.rank, rs, 0); err != nil {
			return l, err
		}
		if l.Rank >= l.World {
			return l, fmt.Errorf("rendezvous: %w: %s=%d is not below %s=%d (want 0 <= rank < world)",
				transport.ErrInvalid, lc.rank, l.Rank, lc.world, l.World)
		}
		if v := strings.TrimSpace(getenv(lc.localSize)); v != "" {
			if lc.source == "slurm" {
				v = firstNumber(v) // "4(x2),3": 4 tasks on each of the first two nodes
			}
			if l.LocalWorld, err = envInt(lc.localSize, v, 1); err != nil {
				return l, err
			}
			if l.LocalWorld > l.World {
				return l, fmt.Errorf("rendezvous: %w: %s=%d exceeds %s=%d", transport.ErrInvalid, lc.localSize, l.LocalWorld, lc.world, l.World)
			}
		}
		if v := strings.TrimSpace(getenv(lc.local)); v != "" {
			if l.LocalRank, err = envInt(lc.local, v, 0); err != nil {
				return l, err
			}
			if l.LocalRank >= l.World || (l.LocalWorld > 0 && l.LocalRank >= l.LocalWorld) {
				return l, fmt.Errorf("rendezvous: %w: %s=%d is out of range (local world %d, world %d)",
					transport.ErrInvalid, lc.local, l.LocalRank, l.LocalWorld, l.World)
			}
		}
		l.Source = lc.source
		break
	}
	addr, err := storeFromEnv(getenv)
	l.StoreAddr = addr
	return l, err
}

// storeFromEnv returns GOCCL_STORE, else MASTER_ADDR:MASTER_PORT.
func storeFromEnv(getenv func(string) string) (string, error) {
	if v := strings.TrimSpace(getenv("GOCCL_STORE")); v != "" {
		if strings.HasPrefix(v, "file:") {
			if len(v) == len("file:") {
				return "", fmt.Errorf("rendezvous: %w: GOCCL_STORE=%q names no directory (want file:/path)", transport.ErrInvalid, v)
			}
			return v, nil
		}
		v = strings.TrimPrefix(v, "tcp://")
		if err := checkHostPort(v); err != nil {
			return "", fmt.Errorf("rendezvous: %w: GOCCL_STORE=%q: %v (want host:port or file:/path)", transport.ErrInvalid, v, err)
		}
		return v, nil
	}
	host, port := strings.TrimSpace(getenv("MASTER_ADDR")), strings.TrimSpace(getenv("MASTER_PORT"))
	switch {
	case host == "" && port == "":
		return "", nil
	case host == "":
		return "", fmt.Errorf("rendezvous: %w: MASTER_PORT=%q is set but MASTER_ADDR is not", transport.ErrInvalid, port)
	case port == "":
		return "", fmt.Errorf("rendezvous: %w: MASTER_ADDR=%q is set but MASTER_PORT is not", transport.ErrInvalid, host)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("rendezvous: %w: MASTER_PORT=%q, want a port number 1..65535", transport.ErrInvalid, port)
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port), nil
}

func checkHostPort(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not 1..65535", port)
	}
	return nil
}

func envInt(name, v string, lo int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > 1<<24 {
		return 0, fmt.Errorf("rendezvous: %w: %s=%q, want an integer >= %d", transport.ErrInvalid, name, v, lo)
	}
	return n, nil
}

// firstNumber returns the leading digits of a Slurm task list ("4(x2),3" -> "4"), or v.
func firstNumber(v string) string {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	if i == 0 {
		return v
	}
	return v[:i]
}
