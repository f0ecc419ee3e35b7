//go:build !race

package goccl

const raceEnabled = false
