package naive_test

import (
	"testing"

	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/naive"
)

func BenchmarkAllReduce(b *testing.B) { algostest.BenchAllReduce(b, naive.Algorithm{}) }
