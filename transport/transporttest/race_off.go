//go:build !race

package transporttest

const raceEnabled = false // see race_on.go
