package tune

import (
	"runtime"

	"github.com/goccl/goccl/algos"
)

// ModelFor is the cost model a communicator's auto selector uses, from what it knows
// after connecting: the transport of each link (links[self] is "self"), the host of
// each rank, its pipelining unit (0 = the default) and the calibrated models of
// Config.TuneFile (nil = none). Links inside a host get shm's model (tcp's if a
// same-host link is neither shm nor inmem), links between hosts tcp's; when the ranks
// span hosts with several on one, algos.HostModel records the layout so that auto
// prices cross-host links and considers "hier". A transport tuned does not cover keeps
// its built-in model (algos.ShmModel, algos.TCPModel). The host-local model's Cores is
// this host's CPU count, since that is what its ranks share whatever the file says.
//
// The communicator and `goccl perf --predict` both call it, so the predictions perf
// prints are the ones the selector compares.
func ModelFor(links, hosts []string, self, chunk int, tuned Models) algos.CostModel {
	model := func(name string, def algos.CostModel) algos.CostModel {
		if m, ok := tuned[name]; ok {
			return m
		}
		return def
	}
	intra, inter := model("shm", algos.ShmModel), model("tcp", algos.TCPModel)
	for p, n := range links {
		if hosts[p] == hosts[self] && n != "self" && n != "shm" && n != "inmem" {
			intra = model(n, builtin(n))
		}
		if hosts[p] != hosts[self] && (n == "shm" || n == "inmem") {
			inter = model("shm", algos.ShmModel) // in-process tests that give goroutines different host names
		}
	}
	intra.Cores = runtime.NumCPU()
	m := algos.HostModel(intra, inter, algos.LayoutOf(hosts))
	if chunk > 0 || m.ChunkBytes == 0 {
		m.ChunkBytes = chunk
	}
	return m
}

// Builtin is the model a communicator on this host uses for a transport's links when no
// tune file covers it: algos.ShmModel for shared memory and the in-process transport,
// algos.TCPModel for the rest, with this host's cores.
func Builtin(name string) algos.CostModel {
	m := builtin(name)
	m.Cores = runtime.NumCPU()
	return m
}

func builtin(name string) algos.CostModel {
	if name == "shm" || name == "inmem" {
		return algos.ShmModel
	}
	return algos.TCPModel
}
