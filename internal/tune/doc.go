// Package tune calibrates the cost models that goccl's auto algorithm selector uses
// (algos.CostModel), from collectives timed on a live communicator, and builds the
// model a communicator uses from its links (ModelFor).
//
// The selector predicts an algorithm's time from six numbers: a cost per call, per
// dependent hop (Alpha), per message at the busiest rank (Overhead), per hop on the
// pipelined goroutine path (Async), per byte on a link (1/Beta) and per byte reduced
// (1/Gamma), with the formulas in package algos (which also know the host's cores:
// with more ranks than cores, hops wait for a core and the work of all ranks shares
// them). The formulas are linear in those six, so Calibrate times AllReduce with every
// built-in algorithm (ring, tree, naive, rd) at a ladder of sizes on both sides of
// algos.EagerBytes and solves for the numbers that predict all of the times best, in
// relative error (a 10% miss at 8 B counts as much as one at 128 MiB, which is what
// "auto within 10% of the best algorithm at every size" asks). The coefficients come
// from algos.CostModel.Predict itself, so the fit follows the formulas whatever they
// are. Every rank times every call and the times are combined with a max-AllReduce
// first, so every rank fits the same numbers and picks the same algorithms, as it must.
//
// Two budgets: Quick (well under a second, for Init: four sizes, ring, naive and rd)
// and the full sweep `goccl tune` runs (8 B to 128 MiB, every algorithm, seconds to a
// few tens of seconds on two cores), which writes a File that config can load. Refit
// (`goccl tune --fit a.json,b.json`) fits one model to files measured at several world
// sizes, which is how the built-in models were made. Worlds of more ranks than the
// host's cores are another machine (hops wait for time slices): they get a fit of their
// own, the model's Crowded terms, when the files hold both kinds:
//
//	res, err := tune.Calibrate(ctx, comm, tune.Options{})
//	err = tune.Save("models.json", res.File())
//	f, err := tune.Load("models.json")   // f.CostModels()["shm"] is an algos.CostModel
//
// Over shm Calibrate also times the staged AllReduce (algos/staged), which the model
// does not price, and FitStaged files the sizes where it won as a StagedRange per world
// size; a communicator whose tune file has one for its size stages only there.
//
// Calibrate on a communicator whose links all use one transport (the model is filed
// under that transport's name); a mixed communicator is refused, since its times cannot
// be split between its transports.
package tune
