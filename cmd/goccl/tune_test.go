package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTuneUsage checks that bad command lines are usage errors (exit 2) and that -h
// prints the usage (exit 0), before any rank is started.
func TestTuneUsage(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"--np", "1"}, 2},
		{[]string{"--np", "two"}, 2},
		{[]string{"--transport", "carrier-pigeon"}, 2},
		{[]string{"--bogus"}, 2},
		{[]string{"extra"}, 2},
		{[]string{"--fit", "/nonexistent/models.json"}, 2},
	} {
		require.Equal(t, tc.want, runTune(ctx, tc.args), "goccl tune %q", tc.args)
	}
}
