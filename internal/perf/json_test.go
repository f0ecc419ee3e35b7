package perf

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestJSONShape(t *testing.T) {
	o, err := Parse([]string{"all_gather", "-b", "8", "-e", "16", "-f", "2", "-J", "x.json"})
	require.NoError(t, err)
	var buf bytes.Buffer
	js := newJSONWriter(&buf)
	now := time.Date(2026, 12, 1, 6, 40, 0, 0, time.UTC)
	js.begin([]string{"goccl", "perf", "all_gather"}, []string{"A=1", "GOCCL_AUTH_TOKEN=s3cret", "PATH=/a/b"}, now)
	var text bytes.Buffer
	r := NewReport(&text, js, o)
	r.Preamble("all_gather_perf", "v", nil, []Device{{Rank: 0, Pid: 7, Host: "h", Hex: "host", Info: "tcp"}})
	r.TableHeader()
	r.RowStart(8, 1, "float", "none", -1)
	r.RowHalf(Half{TimeUs: 1.5, AlgBW: 0.25, BusBW: 0.125, Checked: true}, true)
	r.RowHalf(Half{TimeUs: 2, AlgBW: 0.5, BusBW: 0.25}, false)
	r.RowEnd()
	r.Footer("all_gather_perf", 0, 0.1875, -1, "")
	require.NoError(t, js.end(now))

	// The exact bytes nccl-tests' util.cu writes for these calls: %f doubles, booleans
	// as strings, root as the %6i string, devices inside config, errors [""].
	want := `{"version":3,"start_time":"2026-12-01 06:40:00","args":["goccl","perf","all_gather"],` +
		`"env":["A=1","GOCCL_AUTH_TOKEN=<redacted>","PATH=\/a\/b"],"nccl_version":0,` +
		`"config":{"nthreads":1,"ngpus":1,"minimum_bytes":8,"maximum_bytes":16,"step_factor":2,` +
		`"warmup_iters":1,"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,` +
		`"blocking_collectives":"false","per_iter_timing":"false","per_iter_skip":0,"parallel_init":"false",` +
		`"devices":[{"rank":0,"group":0,"pid":7,"hostname":"h","device":0,"device_hex":"host","device_info":"tcp"}]},` +
		`"results":[{"size":8,"count":1,"type":"float","redop":"none","root":"    -1",` +
		`"out_of_place":{"time":1.500000,"alg_bw":0.250000,"bus_bw":0.125000,"nwrong":0.000000},` +
		`"in_place":{"time":2.000000,"alg_bw":0.500000,"bus_bw":0.250000,"nwrong":null},` +
		`"actual_iterations":20,"experiment_name":""}],` +
		`"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":0.187500,"okay":"unchecked"},` +
		`"errors":[""],"end_time":"2026-12-01 06:40:00"}`
	require.Equal(t, want, buf.String())
	var v map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &v), "the file must be valid JSON")
}

func TestSanitizeJSON(t *testing.T) {
	require.Equal(t, `a\"b\\c\/d\te\nf`, sanitizeJSON("a\"b\\c/d\te\nf"))
	require.Equal(t, "abc", sanitizeJSON("abc\x01def"))
	require.Equal(t, "caf", sanitizeJSON("café"))
}

func TestOpenJSONNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
	require.NoError(t, os.WriteFile(p+".0", []byte("old"), 0o644))
	js, err := openJSON(p)
	require.NoError(t, err)
	require.Equal(t, p+".1", js.path)
	js.begin(nil, nil, time.Unix(0, 0))
	require.NoError(t, js.end(time.Unix(0, 0)))
	old, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "old", string(old))
	_, err = openJSON(filepath.Join(dir, "missing", "r.json"))
	require.ErrorContains(t, err, "perf: -J")
}
