package naive_test

import (
	"testing"

	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/naive"
)

func TestMatrix(t *testing.T) {
	algostest.Matrix(t, naive.Algorithm{}, algostest.Options{Large: true})
}

func TestFailures(t *testing.T) {
	a := naive.Algorithm{}
	algostest.CheckFailures(t, a.Name(), a.Run, a.Supports)
}

// TestEager: no send of more than the eager size waits for its receiver before this
// rank receives (algostest.CheckEager).
func TestEager(t *testing.T) {
	a := naive.Algorithm{}
	algostest.CheckEager(t, a.Name(), a.Run, a.Supports)
}
