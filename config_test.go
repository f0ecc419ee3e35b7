package goccl

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/rendezvous"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "goccl.yaml")
	require.NoError(t, os.WriteFile(file, []byte("algo: tree\ntransport: [shm, tcp]\ntimeout: 30s\nchunk_bytes: 1M\nparams:\n  tcp.sockets: \"3\"\n"), 0o644))

	// File only.
	c, err := LoadConfig(envOf(map[string]string{"GOCCL_CONFIG": file}))
	require.NoError(t, err)
	require.Equal(t, "tree", c.Algo)
	require.Equal(t, []string{"shm", "tcp"}, c.Transports)
	require.Equal(t, 30*time.Second, c.Timeout)
	require.Equal(t, 1<<20, c.ChunkBytes)
	require.Equal(t, "3", c.Params["tcp.sockets"])

	// Env beats file.
	c, err = LoadConfig(envOf(map[string]string{"GOCCL_CONFIG": file, "GOCCL_ALGO": "allreduce:ring,broadcast:tree",
		"GOCCL_TRANSPORT": "tcp", "GOCCL_TIMEOUT": "5", "GOCCL_SOCKETS_PER_PEER": "4"}))
	require.NoError(t, err)
	require.Equal(t, "allreduce:ring,broadcast:tree", c.Algo)
	require.Equal(t, []string{"tcp"}, c.Transports)
	require.Equal(t, 5*time.Second, c.Timeout)
	require.Equal(t, "4", c.Params["tcp.sockets"])

	// Options beat env.
	c = c.Apply(WithAlgo("naive"), WithTransport("inmem"), WithTimeout(time.Minute))
	require.Equal(t, "naive", c.Algo)
	require.Equal(t, []string{"inmem"}, c.Transports)
	require.Equal(t, time.Minute, c.Timeout)

	// Defaults when nothing is set.
	c, err = LoadConfig(envOf(nil))
	require.NoError(t, err)
	require.Equal(t, "auto", c.Algo)
	require.Equal(t, []string{"auto"}, c.Transports)
	require.Equal(t, DefaultTimeout, c.Timeout)
}

func TestConfigJSONFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "goccl.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"algo": "ring", "transport": "tcp,shm", "rank": 1, "world_size": 3}`), 0o644))
	c, err := LoadConfig(envOf(map[string]string{"GOCCL_CONFIG": file}))
	require.NoError(t, err)
	require.Equal(t, "ring", c.Algo)
	require.Equal(t, []string{"tcp", "shm"}, c.Transports)
	require.Equal(t, 1, c.Rank)
	require.Equal(t, 3, c.WorldSize)
}

func TestConfigBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("algoo: ring\n"), 0o644))
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown file key", map[string]string{"GOCCL_CONFIG": bad}, "valid keys"},
		{"missing file", map[string]string{"GOCCL_CONFIG": filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"bad timeout", map[string]string{"GOCCL_TIMEOUT": "soon"}, "GOCCL_TIMEOUT"},
		{"bad chunk", map[string]string{"GOCCL_CHUNK_BYTES": "lots"}, "byte count"},
		{"bad sockets", map[string]string{"GOCCL_SOCKETS_PER_PEER": "0"}, "at least 1"},
		{"bad params", map[string]string{"GOCCL_PARAMS": "novalue"}, "key=value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(envOf(tc.env))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestConfigStringRedactsToken(t *testing.T) {
	c := DefaultConfig().Apply(WithAuthToken("s3cret-token"), WithRank(0, 2), WithParam("shm.single_copy", "false"))
	s := c.String()
	require.NotContains(t, s, "s3cret")
	require.Contains(t, s, "auth_token=<redacted>")
	require.Contains(t, s, "shm.single_copy=false")
	require.Contains(t, s, "world_size=2")
}

func TestConfigTransportParamsFromEnv(t *testing.T) {
	env := map[string]string{"GOCCL_SHM_SINGLE_COPY": "false", "GOCCL_NCCL_LIB": "/opt/nccl/libnccl.so.2"}
	old := environ
	environ = func() []string {
		var out []string
		for k, v := range env {
			out = append(out, k+"="+v)
		}
		return out
	}
	defer func() { environ = old }()
	c, err := LoadConfig(envOf(env))
	require.NoError(t, err)
	require.Equal(t, "false", c.Params["shm.single_copy"])
	require.Equal(t, "/opt/nccl/libnccl.so.2", c.Params["nccl.lib"])
}

// Byte counts in the environment take the same spellings as everywhere else
// (transport.ParseBytes), and a bad one names the variable.
func TestConfigByteCountsFromEnv(t *testing.T) {
	for in, want := range map[string]int{"4096": 4096, "512K": 512 << 10, "4MiB": 4 << 20, "1.5M": 3 << 19} {
		c, err := LoadConfig(envOf(map[string]string{"GOCCL_CHUNK_BYTES": in}))
		require.NoError(t, err, in)
		require.Equal(t, want, c.ChunkBytes, in)
	}
	for _, in := range []string{"-3", "4X", "0.3"} {
		_, err := LoadConfig(envOf(map[string]string{"GOCCL_CHUNK_BYTES": in}))
		require.Error(t, err, in)
		require.Contains(t, err.Error(), "GOCCL_CHUNK_BYTES", in)
		require.Contains(t, err.Error(), "byte count", in)
	}
}

// Timeouts read the same in the file and the environment: a Go duration or plain
// seconds. Anything else, or a time that is not positive or would overflow, is an
// error naming the setting, never a wrapped-around duration.
func TestConfigTimeouts(t *testing.T) {
	dir := t.TempDir()
	for in, want := range map[string]time.Duration{"90": 90 * time.Second, "90s": 90 * time.Second,
		"1m30s": 90 * time.Second, "2.5": 2500 * time.Millisecond, " 500ms ": 500 * time.Millisecond, "+7": 7 * time.Second} {
		c, err := LoadConfig(envOf(map[string]string{"GOCCL_TIMEOUT": in, "GOCCL_INIT_TIMEOUT": in}))
		require.NoError(t, err, in)
		require.Equal(t, want, c.Timeout, in)
		require.Equal(t, want, c.InitTimeout, in)
		file := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(file, []byte("timeout: "+in+"\ninit_timeout: \""+in+"\"\n"), 0o644))
		c, err = LoadConfig(envOf(map[string]string{"GOCCL_CONFIG": file}))
		require.NoError(t, err, in)
		require.Equal(t, want, c.Timeout, in)
		require.Equal(t, want, c.InitTimeout, in)
	}
	for _, in := range []string{"soon", "inf", "NaN", "-Inf", "1e30", "1e3", "0x10", "1_0", "-5", "0", "0s", "-1m",
		"1e-12", "0.0000000001", "3000000h", "4000000000"} {
		_, err := LoadConfig(envOf(map[string]string{"GOCCL_TIMEOUT": in}))
		require.ErrorIs(t, err, transport.ErrInvalid, in)
		require.Contains(t, err.Error(), "GOCCL_TIMEOUT", in)
		file := filepath.Join(dir, "bad.yaml")
		require.NoError(t, os.WriteFile(file, []byte("init_timeout: \""+in+"\"\n"), 0o644))
		_, err = LoadConfig(envOf(map[string]string{"GOCCL_CONFIG": file}))
		require.ErrorIs(t, err, transport.ErrInvalid, in)
		require.Contains(t, err.Error(), "init_timeout", in)
	}
}

// Init checks the transport parameters of every registered transport, whichever the
// links end up on: a misspelt key, a prefix no transport reads, or a value the
// transport would refuse is an error at Init that names it.
func TestInitChecksParams(t *testing.T) {
	for _, tc := range []struct {
		key, val, want string
	}{
		{"tpc.sockets", "4", `parameter "tpc.sockets": no transport reads "tpc." keys (valid prefixes: cublas., cuda.,`},
		{"tcp.socket", "4", `tcp: invalid argument: unknown parameter "tcp.socket" (valid: tcp.addr, tcp.sockets`},
		{"tcp.sockets", "0", `tcp.sockets="0"`},
		{"shm.single_copy", "maybe", `shm.single_copy="maybe"`},
		{"rdma.credits", "lots", `rdma.credits="lots"`},
		{"nccl.min_ctas", "x", `nccl.min_ctas="x"`},
		{"inmem.depth", "3", `unknown parameter "inmem.depth"`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// One rank on inmem: none of the transports above would be opened.
		c, err := Init(ctx, DefaultConfig().Apply(WithRank(0, 1), WithTransport("inmem"), WithParam(tc.key, tc.val)))
		cancel()
		if c != nil {
			c.Close()
		}
		require.ErrorIs(t, err, transport.ErrInvalid, tc.key)
		require.Contains(t, err.Error(), tc.want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Init(ctx, DefaultConfig().Apply(WithRank(0, 1), WithTransport("inmem"),
		WithParam("tcp.sockets", "4"), WithParam("shm.spin", "10us"), WithParam("nccl.lib", "/nowhere/libnccl.so.2")))
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// A log level or subsystem goccl does not have is an error at Init naming the valid
// ones, not a silent WARN or a filter that drops every line; so is a debug file that
// cannot be opened. Communicators naming the same debug file share one descriptor.
func TestDebugSettings(t *testing.T) {
	for _, tc := range []struct{ level, subsys, want string }{
		{"", "", ""}, {"info", "init,coll", ""}, {" TRACE ", "^TRANSPORT", ""}, {"Debug", "ALL", ""}, {"ERROR", "", ""},
		{"VERBOSE", "", `debug level "VERBOSE" (valid: ERROR, WARN, INFO, DEBUG, TRACE)`},
		{"INFO", "INIT,NET", `debug subsystem "NET" in "INIT,NET" (valid: INIT, COLL, TRANSPORT, ALL`},
		{"INFO", "^GRAPH", `debug subsystem "GRAPH"`},
	} {
		err := checkDebug(tc.level, tc.subsys)
		if tc.want == "" {
			require.NoError(t, err, "%q %q", tc.level, tc.subsys)
			continue
		}
		require.ErrorIs(t, err, transport.ErrInvalid)
		require.ErrorContains(t, err, tc.want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one := DefaultConfig().Apply(WithRank(0, 1), WithTransport("inmem"))
	_, err := Init(ctx, one.Apply(WithDebug("LOUD", "")))
	require.ErrorContains(t, err, `debug level "LOUD"`)
	_, err = Init(ctx, one.Apply(WithDebugFile(filepath.Join(t.TempDir(), "no", "such", "dir", "log"))))
	require.ErrorContains(t, err, "debug_file")
	require.ErrorContains(t, err, "no such file or directory")

	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(ents)
	}
	file := filepath.Join(t.TempDir(), "log.%p")
	cfg := one.Apply(WithDebug("INFO", "INIT"), WithDebugFile(file))
	c, err := Init(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	before := fds()
	for range 20 {
		c, err := Init(ctx, cfg)
		require.NoError(t, err)
		require.NoError(t, c.Close())
	}
	require.Less(t, fds()-before, 5, "20 communicators logging to one file must not hold 20 descriptors")
	data, err := os.ReadFile(strings.ReplaceAll(file, "%p", strconv.Itoa(os.Getpid())))
	require.NoError(t, err)
	require.Equal(t, 21, strings.Count(string(data), "goccl init done"))
}

// Every setting reads the same from a Go option, its GOCCL_* variable and its file
// key: the three routes the README's table lists give equal Configs.
func TestConfigRoutesAgree(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		opt       Option
		env, file string // "KEY=value" and "key: value"
	}{
		{WithRank(2, 5), "GOCCL_RANK=2,GOCCL_WORLD_SIZE=5", "rank: 2\nworld_size: 5"},
		{WithLocalRank(1, 3), "GOCCL_RANK=0,GOCCL_WORLD_SIZE=8,GOCCL_LOCAL_RANK=1,GOCCL_LOCAL_WORLD_SIZE=3", "local_rank: 1\nlocal_world_size: 3"},
		{WithStoreAddr("10.0.0.1:29500"), "GOCCL_STORE=10.0.0.1:29500", "store: 10.0.0.1:29500"},
		{WithTransport("shm", "tcp"), "GOCCL_TRANSPORT=shm,tcp", "transport: [shm, tcp]"},
		{WithAlgo("allreduce:tree<64K,ring"), "GOCCL_ALGO=allreduce:tree<64K,ring", `algo: "allreduce:tree<64K,ring"`},
		{WithChunkBytes(3 << 19), "GOCCL_CHUNK_BYTES=1.5M", "chunk_bytes: 1.5M"},
		{WithTimeout(90 * time.Second), "GOCCL_TIMEOUT=90", "timeout: 1m30s"},
		{WithInitTimeout(2500 * time.Millisecond), "GOCCL_INIT_TIMEOUT=2.5s", "init_timeout: 2.5"},
		{WithAuthToken("tok"), "GOCCL_AUTH_TOKEN=tok", "auth_token: tok"},
		{WithHost("h7"), "GOCCL_HOST_ID=h7", "host: h7"},
		{WithName("job2"), "GOCCL_NAME=job2", "name: job2"},
		{WithParam("tcp.sockets", "4"), "GOCCL_SOCKETS_PER_PEER=4", "sockets_per_peer: 4"},
		{WithParam("shm.spin", "10us"), "GOCCL_PARAMS=shm.spin=10us", "params: {shm.spin: 10us}"},
		{WithDebug("INFO", "INIT,COLL"), "GOCCL_DEBUG=INFO,GOCCL_DEBUG_SUBSYS=INIT,COLL", "debug: INFO\ndebug_subsys: INIT,COLL"},
		{WithDebugFile("/tmp/log.%p"), "GOCCL_DEBUG_FILE=/tmp/log.%p", "debug_file: /tmp/log.%p"},
		{WithTrace("/tmp/tr"), "GOCCL_TRACE=/tmp/tr", "trace: /tmp/tr"},
		{WithTuneFile("/tmp/t.json"), "GOCCL_TUNE_FILE=/tmp/t.json", "tune_file: /tmp/t.json"},
	} {
		byOpt := DefaultConfig().Apply(tc.opt)
		env := map[string]string{}
		// The debug subsystems are a comma list themselves: split only on "GOCCL_".
		for _, kv := range strings.Split(strings.ReplaceAll(tc.env, ",GOCCL_", "\x00GOCCL_"), "\x00") {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		byEnv, err := LoadConfig(envOf(env))
		require.NoError(t, err, tc.env)
		file := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(file, []byte(tc.file+"\n"), 0o644))
		byFile, err := LoadConfig(envOf(map[string]string{"GOCCL_CONFIG": file}))
		require.NoError(t, err, tc.file)
		// Rank and world from a launcher's variables carry their source; the
		// local-rank case needs a rank and world in the environment, which the option
		// and the file leave unset.
		for _, c := range []*Config{&byOpt, &byEnv, &byFile} {
			c.source = ""
			if tc.env != "" && strings.HasPrefix(tc.env, "GOCCL_RANK=0,") {
				c.Rank, c.WorldSize = -1, -1
			}
		}
		require.Equal(t, byOpt, byEnv, "option against %s", tc.env)
		require.Equal(t, byOpt, byFile, "option against %q", tc.file)
	}
}

// A rank whose debug file cannot be opened fails Init, and its peer, which could open
// its own, fails at once naming it rather than waiting for the init timeout.
func TestDebugFileFailureReachesPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := rendezvous.NewMemStore()
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "ok.log"), filepath.Join(dir, "missing", "bad.log")}
	start := time.Now()
	errs := make([]error, 2)
	done := make(chan int)
	for r := range 2 {
		go func() {
			c, err := Init(ctx, DefaultConfig().Apply(WithRank(r, 2), WithStore(store), WithTransport("inmem"),
				WithInitTimeout(45*time.Second), WithDebugFile(files[r])))
			if c != nil {
				c.Close()
			}
			errs[r] = err
			done <- r
		}()
	}
	<-done
	<-done
	require.Less(t, time.Since(start), 20*time.Second, "the peer must not wait for the 45 s init timeout")
	require.ErrorContains(t, errs[1], "debug_file")
	require.Error(t, errs[0])
	require.Contains(t, errs[0].Error(), "rank 1", "rank 0's error names the failed rank: %v", errs[0])
	require.Contains(t, errs[0].Error(), "debug_file")
}
