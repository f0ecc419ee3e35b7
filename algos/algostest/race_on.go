//go:build race

package algostest

// raceEnabled trims Matrix under the race detector, which slows these goroutine-heavy
// runs about tenfold; the full matrix runs without it.
const raceEnabled = true
