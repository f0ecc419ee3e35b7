package perf

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The expectations below were written from nccl-tests' format strings (src/util.cu:
// getFloatStr, writeResultHeader, writeBenchmarkLine*, writeResultFooter), not from
// this package's output.

func TestFloatStr(t *testing.T) {
	cases := []struct {
		v      float64
		w6, w7 string
	}{
		{0, "  0.00", "   0.00"},
		{0.004, "  0.00", "   0.00"},
		{0.005, "  0.01", "   0.01"}, // 0.005 is a little above 5e-3 in binary
		{0.015, "  0.01", "   0.01"}, // and 0.015 a little below
		{1.5, "  1.50", "   1.50"},
		{999.99, "999.99", " 999.99"},
		{999.995, "1000.0", "1000.00"}, // rounding carries into a new digit: fall back a decimal
		{9999.94, "9999.9", "9999.94"},
		{9999.96, " 10000", "9999.96"},
		{99999.4, " 99999", "99999.4"},
		{99999.6, "100000", "99999.6"},
		{999999, "999999", " 999999"},
		{1234567, " 1e+06", "1234567"},
		{12345678, " 1e+07", "1.2e+07"},
		{1e100, "1e+100", "1.0e+10"}, // cut to the width, as snprintf(width+1) does
		{123456789012, " 1e+11", "1.2e+11"},
	}
	for _, c := range cases {
		require.Equal(t, c.w6, FloatStr(c.v, 6), "width 6 of %v", c.v)
		require.Equal(t, c.w7, FloatStr(c.v, 7), "width 7 of %v", c.v)
		require.LessOrEqual(t, len(FloatStr(c.v, 6)), 6)
		require.LessOrEqual(t, len(FloatStr(c.v, 7)), 7)
	}
}

func TestCG(t *testing.T) {
	cases := map[float64]string{
		0: "0", 1: "1", 190.5951234: "190.595", 1e6: "1e+06", 123456: "123456",
		1234567: "1.23457e+06", 0.0001: "0.0001", 0.00001234: "1.234e-05", 12.5: "12.5", 3: "3",
	}
	for v, want := range cases {
		require.Equal(t, want, CG(v), "%%g of %v", v)
	}
}

func TestTypeNames(t *testing.T) {
	ts, err := parseTypes("all")
	require.NoError(t, err)
	var names []string
	for _, d := range ts {
		names = append(names, TypeName(d))
	}
	require.Equal(t, []string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"}, names)
}

const goldenTable = `#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
           8             2     float     sum      -1    12.34    0.00    0.00       0    11.00    0.00    0.00       0
   134217728      33554432     float     sum      -1  1234567  108.71  190.25       0  99999.6  1000.0   1e+06  1.23457e+06
        1024           256  bfloat16    none       3     5.00    0.20    0.15    N/A     5.00    0.20    0.15    N/A
# Out of bounds values : 1 FAILED
# Avg bus bandwidth    : 190.595 
#
# Collective test concluded: all_reduce_perf
#

`

func TestGoldenTable(t *testing.T) {
	var out bytes.Buffer
	o := DefaultOptions()
	r := NewReport(&out, nil, o)
	r.TableHeader()
	r.RowStart(8, 2, "float", "sum", -1)
	r.RowHalf(Half{TimeUs: 12.344, AlgBW: 0.000648, BusBW: 0.000648, Checked: true}, true)
	r.RowHalf(Half{TimeUs: 11, AlgBW: 0.000727, BusBW: 0.000727, Checked: true}, false)
	r.RowEnd()
	r.RowStart(134217728, 33554432, "float", "sum", -1)
	r.RowHalf(Half{TimeUs: 1234567, AlgBW: 108.714, BusBW: 190.25, Checked: true}, true)
	r.RowHalf(Half{TimeUs: 99999.6, AlgBW: 999.995, BusBW: 1e6, Wrong: 1234567, Checked: true}, false)
	r.RowEnd()
	r.RowStart(1024, 256, "bfloat16", "none", 3)
	r.RowHalf(Half{TimeUs: 5, AlgBW: 0.2, BusBW: 0.15}, true)
	r.RowHalf(Half{TimeUs: 5, AlgBW: 0.2, BusBW: 0.15}, false)
	r.RowEnd()
	r.Footer("all_reduce_perf", 1, 190.5951234, -1, "")
	require.Equal(t, goldenTable, out.String())
}

const goldenPreamble = `# goccl perf version 1.2.3 (nccl-tests 2.19.6 format) nccl-headers=0 nccl-library=0
# Collective test starting: broadcast_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 0 graph: 0 unalign: 0
# Blocking Enabled: wait after each inner iteration (-m), no barrier 
# goccl transport tcp, algo ring
#
# Using devices
#  Rank  0 Group  0 Pid  12345 on      host1 device  0 [host] tcp
#  Rank  1 Group  0 Pid 987654 on averyveryverylonghost device  1 [0000:18:00] NVIDIA H200
`

func TestGoldenPreamble(t *testing.T) {
	o, err := Parse([]string{"broadcast", "-b", "8", "-e", "128M", "-f", "2", "-w", "5", "-c", "0", "-z", "2"})
	require.NoError(t, err)
	var out bytes.Buffer
	NewReport(&out, nil, o).Preamble("broadcast_perf", "1.2.3", []string{"goccl transport tcp, algo ring"}, []Device{
		{Rank: 0, Pid: 12345, Host: "host1", Device: 0, Hex: "host", Info: "tcp"},
		{Rank: 1, Pid: 987654, Host: "averyveryverylonghost", Device: 1, Hex: "0000:18:00", Info: "NVIDIA H200"},
	})
	require.Equal(t, goldenPreamble, out.String())
}

func TestStepBytesLine(t *testing.T) {
	o, err := Parse([]string{"all_reduce", "-b", "1K", "-e", "4K", "-i", "1K"})
	require.NoError(t, err)
	var out bytes.Buffer
	NewReport(&out, nil, o).Preamble("all_reduce_perf", "x", nil, nil)
	require.Contains(t, out.String(), "# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 1024(bytes) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n#\n# Using devices\n")
}

const goldenTimestamps = `#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root  cputime   algbw   busbw  #wrong  cputime   algbw   busbw  #wrong           timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)           %Y-%m-%d %H:%M:%S
           0             0     int32     max       0     1.00    0.00    0.00       0     1.00    0.00    0.00       0  2026-12-01 06:40:00
`

func TestGoldenTimestampsAndCPUTime(t *testing.T) {
	o, err := Parse([]string{"reduce", "-S", "1", "-C", "1", "-d", "int32", "-o", "max", "-b", "0", "-e", "0"})
	require.NoError(t, err)
	var out bytes.Buffer
	r := NewReport(&out, nil, o)
	r.now = func() time.Time { return time.Date(2026, 12, 1, 6, 40, 0, 0, time.UTC) }
	r.TableHeader()
	r.RowStart(0, 0, "int32", "max", 0)
	r.RowHalf(Half{TimeUs: 1, Checked: true}, true)
	r.RowHalf(Half{TimeUs: 1, Checked: true}, false)
	r.RowEnd()
	require.Equal(t, goldenTimestamps, out.String())
}

// goldenPredict is goldenTable's first rows with --predict: nccl-tests' columns
// unchanged, then the model's time, its error against the out-of-place time, and the
// algorithm it priced (N/A when there is none, e.g. an offloaded call).
const goldenPredict = `#
#                                                              out-of-place                       in-place                 model
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong     model   error  algo
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)              (us)     (%)
           8             2     float     sum      -1    12.34    0.00    0.00       0    11.00    0.00    0.00       0    10.00  -18.99  rd
   134217728      33554432     float     sum      -1  1234567  108.71  190.25       0  99999.6  1000.0   1e+06  1.23457e+06  1200000   -2.80  ring
        1024           256  bfloat16    none       3     5.00    0.20    0.15    N/A     5.00    0.20    0.15    N/A      N/A     N/A  none
`

func TestGoldenPredict(t *testing.T) {
	o, err := Parse([]string{"all_reduce", "--predict"})
	require.NoError(t, err)
	require.True(t, o.Predict)
	var out bytes.Buffer
	r := NewReport(&out, nil, o)
	r.TableHeader()
	r.RowStart(8, 2, "float", "sum", -1)
	r.RowHalf(Half{TimeUs: 12.344, AlgBW: 0.000648, BusBW: 0.000648, Checked: true}, true)
	r.RowHalf(Half{TimeUs: 11, AlgBW: 0.000727, BusBW: 0.000727, Checked: true}, false)
	r.RowPredict(Prediction{Algo: "rd", TimeUs: 10, MeasuredUs: 12.344})
	r.RowEnd()
	r.RowStart(134217728, 33554432, "float", "sum", -1)
	r.RowHalf(Half{TimeUs: 1234567, AlgBW: 108.714, BusBW: 190.25, Checked: true}, true)
	r.RowHalf(Half{TimeUs: 99999.6, AlgBW: 999.995, BusBW: 1e6, Wrong: 1234567, Checked: true}, false)
	r.RowPredict(Prediction{Algo: "ring", TimeUs: 1.2e6, MeasuredUs: 1234567})
	r.RowEnd()
	r.RowStart(1024, 256, "bfloat16", "none", 3)
	r.RowHalf(Half{TimeUs: 5, AlgBW: 0.2, BusBW: 0.15}, true)
	r.RowHalf(Half{TimeUs: 5, AlgBW: 0.2, BusBW: 0.15}, false)
	r.RowPredict(Prediction{})
	r.RowEnd()
	require.Equal(t, goldenPredict, out.String())
	// Without --predict the same calls print nccl-tests' table exactly (TestGoldenTable).
	require.Contains(t, goldenTable, strings.Split(goldenPredict, "model\n")[0][:60])
}
