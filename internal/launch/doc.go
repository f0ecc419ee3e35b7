// Package launch runs a local multi-rank job: the library behind `goccl run` and
// `goccl perf --np N`.
//
// Run serves a TCPStore for the job, starts N copies of a program with the launcher
// variables of goccl (GOCCL_RANK, GOCCL_WORLD_SIZE, GOCCL_LOCAL_RANK,
// GOCCL_LOCAL_WORLD_SIZE, GOCCL_STORE) and of torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), prefixes their output lines with
// "[rank N] " (stdout and stderr kept apart), forwards the signals it is given, and when
// one rank fails stops the rest (SIGTERM, then SIGKILL after a grace period) and returns
// a *RankError naming that rank, its pid and its exit status or signal:
//
//	sigs := make(chan os.Signal, 1)
//	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
//	err := launch.Run(ctx, launch.Options{N: 4, Argv: []string{"./trainer"}, Prefix: true, Signals: sigs})
//
// Each rank leads its own process group and, on Linux, dies with the launcher.
package launch
