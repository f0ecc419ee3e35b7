// Package algostest runs collective algorithms on goroutine ranks over real in-process
// links (transport/inmem) and checks them against a serial float64 (or exact integer)
// reference. Algorithm packages call Matrix from their tests; anyone writing a new
// algorithm gets the same coverage: every collective it implements, every dtype and
// op, world sizes 1 to 8, counts from 0 to millions, in-place and out-of-place, every
// root.
//
//	func TestMatrix(t *testing.T) { algostest.Matrix(t, ring.Algorithm{}, algostest.Options{}) }
//
// A Mesh is W ranks with a link between every pair; Mesh.Run runs one collective on all
// of them and, like a communicator's abort, closes the links of a rank whose algorithm
// failed, so its peers fail too instead of waiting.
//
// CheckEager runs an algorithm over links that keep the eager contract to the letter
// (Mesh.Strict), and CheckBatch checks several calls in flight together, issued by any
// function (a communicator's asynchronous calls, say), on buffers from any allocator.
package algostest
