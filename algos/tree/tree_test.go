package tree_test

import (
	"testing"

	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/tree"
)

func TestMatrix(t *testing.T) {
	algostest.Matrix(t, tree.Algorithm{}, algostest.Options{Large: true})
}

func TestFailures(t *testing.T) {
	a := tree.Algorithm{}
	algostest.CheckFailures(t, a.Name(), a.Run, a.Supports)
}

// TestEager: no send of more than the eager size waits for its receiver before this
// rank receives (algostest.CheckEager).
func TestEager(t *testing.T) {
	a := tree.Algorithm{}
	algostest.CheckEager(t, a.Name(), a.Run, a.Supports)
}
