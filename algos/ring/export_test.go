package ring

import "github.com/goccl/goccl/algos"

// SetSerialLarge replaces the rule for running large steps serially and returns a
// function that restores it.
func SetSerialLarge(f func(algos.Peers) bool) (restore func()) {
	old := serialLarge
	serialLarge = f
	return func() { serialLarge = old }
}
