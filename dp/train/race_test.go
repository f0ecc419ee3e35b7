//go:build race

package train

// raceEnabled: the race detector cannot see the happens-before edges that shared
// memory between processes creates (a rank's send and its later receive into the same
// buffer are ordered only through the peer process), so under -race the multi-process
// test links ranks over TCP. See .proposals/dp.md.
const raceEnabled = true
