// Package tune calibrates the alpha-beta-gamma cost models that goccl's auto algorithm
// selector uses (algos.CostModel), from collectives timed on a live communicator.
//
// The selector predicts an algorithm's time as steps x Alpha + bytes on the busiest
// link / Beta + reduced bytes / Gamma, with the formulas in package algos. Those
// formulas are linear in Alpha, 1/Beta and 1/Gamma, so Calibrate times AllReduce with
// every built-in algorithm (ring, tree, naive) at a ladder of sizes and solves for the
// three numbers that predict all of the times best, in relative error (a 10% miss at
// 8 B counts as much as one at 64 MiB, which is what "auto within 10% of the best
// algorithm at every size" asks). Every rank times every call and the times are
// combined with a max-AllReduce first, so every rank fits the same numbers and picks
// the same algorithms, as it must.
//
// Two budgets: Quick (well under a second, for Init: three sizes, ring and tree) and the
// full sweep `goccl tune` runs (8 B to 64 MiB, every algorithm, about a minute on two
// cores), which writes a File that config can load:
//
//	models, err := tune.Calibrate(ctx, comm, tune.Options{})
//	err = tune.Save("models.json", tune.NewFile(models, comm.Size()))
//	f, err := tune.Load("models.json")   // f.Models["shm"] is an algos.CostModel
//
// Calibrate on a communicator whose links all use one transport (the model is filed
// under that transport's name); a mixed communicator is refused, since its times cannot
// be split between its transports.
package tune
