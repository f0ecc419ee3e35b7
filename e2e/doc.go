// Package e2e holds goccl's end-to-end tests: ranks are real processes started by the
// real launcher (`goccl run -n N -- rankprog ...`), linked by real sockets and real
// shared memory, and the tests judge what those processes print and how they exit.
//
// TestMain builds cmd/goccl and e2e/rankprog once into a temporary directory. The tests
// cover the collective matrix between processes over tcp, shm and a mix of both; rank
// deaths by SIGKILL at random points (every survivor must fail fast, name the dead rank
// and leak nothing); ranks that disagree about a collective; authentication; resources
// left after Close or a failed Init; and strangers sending garbage to a live job.
// RELIABILITY.md at the repository root reports what these tests found.
//
// `go test -short` runs reduced fault loops. E2E_FAULT_BUDGET (a duration) sets the
// time the fault loop may use, for longer soak runs; E2E_REPORT names a file that
// receives the detection latencies as JSON.
package e2e
