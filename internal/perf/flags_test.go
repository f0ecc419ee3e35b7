package perf

import (
	"bytes"
	"testing"
	"time"

	"github.com/goccl/goccl/transport"
	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"8": 8, "0": 0, "1024": 1024, "1K": 1024, "1k": 1024, "32M": 32 << 20, "32m": 32 << 20,
		"2G": 2 << 30, "1.5M": 3 << 19, "0.5K": 512, "64KB": 64 << 10, " 4M ": 4 << 20, "1e3": 1000,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "M", "1X", "abc", "-1", "1.5.5M", "NaN", "inf", "4PB", "1e20"} {
		_, err := ParseSize(bad)
		require.Error(t, err, bad)
	}
}

func TestParseDefaults(t *testing.T) {
	o, err := Parse([]string{"all_reduce"})
	require.NoError(t, err)
	require.Equal(t, "all_reduce", o.Coll.Name)
	require.Equal(t, int64(32<<20), o.MinBytes)
	require.Equal(t, int64(32<<20), o.MaxBytes)
	require.Equal(t, int64(1<<20), o.StepBytes)
	require.Equal(t, int64(1), o.StepFactor)
	require.Equal(t, 20, o.Iters)
	require.Equal(t, 1, o.Warmup)
	require.Equal(t, 1, o.Check)
	require.Equal(t, 1, o.Average)
	require.Equal(t, []transport.Op{transport.Sum}, o.Ops)
	require.Equal(t, []transport.DType{transport.Float32}, o.DTypes)
	require.Equal(t, 0, o.Root)
	require.Equal(t, 0, o.NP)
	require.False(t, o.Predict, "the default table is nccl-tests' own")
	o, err = Parse([]string{"all_reduce", "--predict"})
	require.NoError(t, err)
	require.True(t, o.Predict)
	_, err = Parse([]string{"all_reduce", "--predict=1"})
	require.ErrorContains(t, err, "takes no value")
}

func TestParseFlags(t *testing.T) {
	o, err := Parse([]string{"-b8", "--maxbytes=128M", "-f", "2", "-n", "5", "-w", "0", "-m", "2",
		"-N", "3", "-c", "0", "-o", "all", "-d", "half", "-r", "-1", "-z", "3", "-T", "30", "-C", "1",
		"-a", "3", "-u", "1", "-I", "1", "-K", "2", "-J", "out.json", "-S", "1", "-np", "4",
		"--transport", "shm,tcp", "--algo=ring,tree", "--plot", "bw.png", "reduce_perf", "-v", "-p", "1", "-y", "1",
		"-t", "1", "-g", "1", "-G", "0", "-R", "0"})
	require.NoError(t, err)
	require.Equal(t, "reduce", o.Coll.Name)
	require.Equal(t, int64(8), o.MinBytes)
	require.Equal(t, int64(128<<20), o.MaxBytes)
	require.Equal(t, int64(2), o.StepFactor)
	require.Equal(t, 5, o.Iters)
	require.Equal(t, 0, o.Warmup)
	require.Equal(t, 2, o.AggIters)
	require.Equal(t, 3, o.RunCycles)
	require.Equal(t, 0, o.Check)
	require.Equal(t, transport.Ops, o.Ops)
	require.Equal(t, []transport.DType{transport.Float16}, o.DTypes)
	require.Equal(t, -1, o.Root)
	require.Equal(t, 3, o.Blocking)
	require.Equal(t, 30*time.Second, o.Timeout)
	require.True(t, o.CPUTime)
	require.Equal(t, 3, o.Average)
	require.Equal(t, 1, o.Unalign)
	require.True(t, o.PerIter)
	require.Equal(t, 2, o.PerIterSkip)
	require.Equal(t, "out.json", o.JSONFile)
	require.True(t, o.Timestamps)
	require.Equal(t, 4, o.NP)
	require.Equal(t, []string{"shm", "tcp"}, o.Transports)
	require.Equal(t, []string{"ring", "tree"}, o.Algos)
	require.Equal(t, "bw.png", o.Plot)
	require.True(t, o.Verbose)
	require.Len(t, o.Args, 59)
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{}, "name the collective to test (valid: all_reduce, all_gather"},
		{[]string{"allreduce2"}, `unknown collective "allreduce2"`},
		{[]string{"all_reduce", "broadcast"}, "one collective at a time"},
		{[]string{"all_reduce", "-n", "abc"}, `flag -n (--iters): "abc" is not an integer`},
		{[]string{"all_reduce", "-n", "0"}, "flag -n (--iters): 0 is out of range (want >= 1)"},
		{[]string{"all_reduce", "-b", "1X"}, `flag -b (--minbytes): "1X" is not a size`},
		{[]string{"all_reduce", "-e", "-5"}, `flag -e (--maxbytes): "-5" is negative`},
		{[]string{"all_reduce", "-b", "2M", "-e", "1M"}, "minbytes 2097152 is larger than maxbytes 1048576"},
		{[]string{"all_reduce", "-o", "bogus"}, `unknown op "bogus" (valid: sum, prod, max, min, avg, all)`},
		{[]string{"all_reduce", "-o", "mulsum"}, "mulsum (PreMulSum) is not supported"},
		{[]string{"all_reduce", "-d", "float8"}, `unknown datatype "float8" (valid: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, all)`},
		{[]string{"all_reduce", "-d", "f8e4m3"}, "fp8"},
		{[]string{"all_reduce", "-t", "2"}, "use --np N"},
		{[]string{"all_reduce", "-G", "1"}, "-G (CUDA graphs) is not supported"},
		{[]string{"all_reduce", "-a", "4"}, "4 is out of range (want 0..3)"},
		{[]string{"all_reduce", "-z", "7"}, "7 is out of range (want 0..3)"},
		{[]string{"all_reduce", "-r", "-2"}, "-2 is out of range"},
		{[]string{"all_reduce", "-q", "1"}, "unknown flag -q"},
		{[]string{"all_reduce", "--bogus"}, "unknown flag --bogus"},
		{[]string{"all_reduce", "-n"}, "flag -n (--iters) needs a value (N)"},
		{[]string{"all_reduce", "--verbose=1"}, "takes no value"},
		{[]string{"all_reduce", "-J", "out.txt"}, `"out.txt" does not end in .json`},
		{[]string{"all_reduce", "--plot", "x.svg"}, "does not end in .png"},
		{[]string{"all_reduce", "-K", "1"}, "-K 1 needs -I 1"},
		{[]string{"all_reduce", "-I", "1", "-n", "3", "-K", "3"}, "-K 3 must be less than -n 3"},
		{[]string{"all_reduce", "--np", "0"}, "0 is out of range (want 1..1024)"},
		{[]string{"all_reduce", "--transport", ","}, "names nothing"},
		{[]string{"all_reduce", "--device", "tpu"}, `"tpu" is not a device (valid: host, cuda)`},
		{[]string{"all_reduce", "-b", "0", "-e", "8", "-f", "2"}, "never grows"},
		{[]string{"all_reduce", "--interleave", "-1"}, "-1 is out of range (want >= 0)"},
		{[]string{"all_reduce", "--interleave", "21"}, "--interleave 21 splits -n 20 calls into blocks: it must be at most -n"},
		{[]string{"all_reduce", "--interleave", "2", "-I", "1"}, "does not combine with -I 1"},
		{[]string{"all_reduce", "--interleave", "2", "-N", "0"}, "does not combine with -N 0"},
	}
	for _, c := range cases {
		_, err := Parse(c.args)
		require.Error(t, err, "%q", c.args)
		require.True(t, IsUsage(err), "%q: %v", c.args, err)
		require.ErrorContains(t, err, c.msg, "%q", c.args)
	}
}

func TestParseHelp(t *testing.T) {
	o, err := Parse([]string{"-h"})
	require.NoError(t, err)
	require.True(t, o.Help)
	var b bytes.Buffer
	Usage(&b)
	for _, s := range optSpecs {
		require.Contains(t, b.String(), "--"+s.long)
	}
}
