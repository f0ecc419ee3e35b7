//go:build !race

package algostest

const raceEnabled = false
