package tree_test

import (
	"testing"

	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/tree"
)

func BenchmarkAllReduce(b *testing.B) { algostest.BenchAllReduce(b, tree.Algorithm{}) }
