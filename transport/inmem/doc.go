// Package inmem is an in-process transport: ranks are goroutines of one process and a
// link is a pair of Go channels. It is real, exported code (not a mock): tests run whole
// communicators on it, and programs can use it to run several ranks in one process.
//
// Ranks find each other by communicator id, so every rank of one communicator must live
// in the same process. Messages are copied on Send, so the sender may reuse its buffer.
//
//	import _ "github.com/goccl/goccl/transport/inmem" // registers "inmem"
package inmem
