package ring_test

import (
	"testing"

	"github.com/goccl/goccl/algos/algostest"
	"github.com/goccl/goccl/algos/ring"
)

func BenchmarkAllReduce(b *testing.B) { algostest.BenchAllReduce(b, ring.Algorithm{}) }
