// Command rankprog is one rank of goccl's end-to-end tests: `goccl run -n N -- rankprog
// -mode M ...` starts N of them. It reads its configuration the way a user's program
// does (goccl.FromEnv, so GOCCL_TRANSPORT, GOCCL_ALGO, GOCCL_TIMEOUT, GOCCL_AUTH_TOKEN
// ... all apply), runs one scenario and reports on stdout in lines the tests parse:
//
//	matrix    every collective x dtype x op x count, checked against a float64 serial
//	          reference computed here (inputs are a hash of seed, rank and index, so each
//	          rank can compute every rank's input): "MATRIX rank=R calls=N bad=B".
//	p2p       AllToAllV with uneven counts for every element size, apart and in place,
//	          then random batches of BatchSendRecv, every byte checked against its
//	          sender's formula (internal/p2ptest): "P2P rank=R calls=N bad=B".
//	fault     a collective (-kind: allreduce, broadcast, allgather, barrier, sendrecv
//	          as a ring shift, alltoallv, or batch: a BatchSendRecv with both ring
//	          neighbours) in a loop until it fails (the test kills a rank); SIGTERM from
//	          the launcher is ignored so the survivor shows how it detects the death
//	          itself: "READY rank=R pid=P", then "FAULT rank=R t=UNIXNANO err=...".
//	mismatch  three calls, one rank deviating in the second (kind, count, dtype, op,
//	          root, a skipped call): "OUTCOME rank=R call=K ms=T err=...".
//	auth      Init and one checked AllReduce, with an optional per-rank token override:
//	          "AUTH rank=R ok" or "AUTH rank=R err=...".
//	hold      checked AllReduces in a loop for a while (a job for strangers to poke at).
//
// Exit status: 0 when the scenario ran as its mode defines, 1 on an unexpected error.
package main
