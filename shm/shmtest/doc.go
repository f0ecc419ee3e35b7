// Package shmtest holds helpers for tests that run shm ranks as real processes: a
// rendezvous store that lives in a directory, so processes started by a test (re-execs
// of the test binary) can find each other without a server.
//
// FileStore needs flock, so it is built on unix systems only.
package shmtest
