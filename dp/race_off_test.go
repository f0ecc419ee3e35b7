//go:build !race

package dp_test

const raceEnabled = false // see race_on_test.go
