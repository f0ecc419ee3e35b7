//go:build race

package transporttest

// raceEnabled: the race detector slows every copy about tenfold; testRandom sends a
// quarter of its messages under it.
const raceEnabled = true
