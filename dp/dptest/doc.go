// Package dptest holds test helpers for dp: a communicator wrapper that slows every
// collective down and records when each one really starts and ends (the "slow
// transport" the overlap tests and benchmarks use), and an event log to check orders.
package dptest
