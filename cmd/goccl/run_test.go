package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bad goccl run command lines are usage errors (exit 2) that say what was wrong,
// before any rank starts.
func TestRunUsage(t *testing.T) {
	prog := []string{"true"}
	for _, tc := range []struct {
		n, port int
		grace   time.Duration
		argv    []string
		ids     []string
		want    string
	}{
		{0, 0, 0, prog, nil, "-n 0: want 1..1024 ranks"},
		{1025, 0, 0, prog, nil, "-n 1025: want 1..1024 ranks"},
		{2, 0, 0, nil, nil, "no program given (put it after --)"},
		{2, 70000, 0, prog, nil, "--store-port 70000: want 0..65535"},
		{2, 0, -time.Second, prog, nil, "--grace -1s: want a duration >= 0"},
		{3, 0, 0, prog, []string{"a", "b"}, "--host-id has 2 values for 3 ranks: give one, or one per rank"},
	} {
		require.EqualError(t, checkRun(tc.n, tc.port, tc.grace, tc.argv, tc.ids), tc.want)
	}
	require.NoError(t, checkRun(1024, 65535, 0, prog, []string{"a"}))
	require.NoError(t, checkRun(2, 0, time.Second, prog, []string{"a", "b"}))
	for _, args := range [][]string{{"-n", "0", "--", "true"}, {"-n", "2"}, {"-n", "2", "--grace", "-5s", "--", "true"}, {"--bogus"}} {
		require.Equal(t, 2, runRun(context.Background(), args), "%v", args)
	}
}
