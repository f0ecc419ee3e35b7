// Package perf is `goccl perf`: a benchmark that prints nccl-tests' table, byte for
// byte, so goccl's numbers sit beside NCCL's.
//
// It keeps nccl-tests' flags (-b -e -i -f -n -w -m -N -c -o -d -r -z -a -T -J -S -u -I
// -K with the same letters and defaults), its size sweep and per-collective counts
// (per-rank counts rounded down to 16 bytes), its busbw factors, its µs and decimal
// GB/s, its fixed-width number formatter and its JSON file, and adds --np (start N
// local ranks), --transport and --algo (comma lists: one full report per
// combination) and --plot (a PNG of busbw and time against size).
//
// Lifetimes: Main parses the flags; without --np and outside a launcher it starts
// DefaultLocalRanks ranks by re-executing the binary through internal/launch. Each
// rank creates one goccl.Comm per transport, runs every test on it, and only rank 0
// prints. Times are combined across ranks with the communicator itself (-a), and the
// data check (-c) uses inputs whose exact result does not depend on the reduction
// order, so results compare bit for bit (see Check).
//
// Exit status: 0 ok, 2 bad usage, 4 a test ran past -T, 7 wrong data (nccl-tests'
// testNumResults), 1 anything else.
//
//	goccl perf all_reduce -b 8 -e 128M -f 2 --np 4 --transport shm,tcp --plot bw.png
package perf
