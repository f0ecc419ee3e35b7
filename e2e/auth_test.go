package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// token is distinctive so a leak into any output is found by a plain search.
const token = "e2e-Secret-7f3a9c1d5b"

// requireNoToken fails if the token (or its hex or base64 spelling would be overkill: the
// token is only ever compared as bytes) appears anywhere in the job's output.
func requireNoToken(t *testing.T, res result) {
	t.Helper()
	require.NotContains(t, res.stdout, token, "the auth token leaked to stdout")
	require.NotContains(t, res.stderr, token, "the auth token leaked to stderr")
}

// TestAuthToken: with GOCCL_AUTH_TOKEN on the launcher and every rank, the job works
// over tcp and shm, and the token never appears in the output even at the most verbose
// log level.
func TestAuthToken(t *testing.T) {
	for _, tr := range transports {
		for _, level := range []string{"INFO", "TRACE"} {
			t.Run(tr+"/"+level, func(t *testing.T) {
				res := job{n: 3, env: []string{"GOCCL_TRANSPORT=" + tr, "GOCCL_AUTH_TOKEN=" + token, "GOCCL_DEBUG=" + level},
					launcher: []string{"-v"}, args: []string{"-mode", "auth"}, timeout: time.Minute}.run(t)
				require.Equal(t, 0, res.code, "%s", res)
				outs := records(res.stdout, "AUTH")
				require.Len(t, outs, 3, "%s", res)
				for r, o := range outs {
					require.Contains(t, o.line, " ok", "rank %d", r)
				}
				require.Contains(t, res.stderr, "goccl init done", "GOCCL_DEBUG=%s logged nothing, so the leak check means nothing", level)
				requireNoToken(t, res)
			})
		}
	}
}

// TestAuthStoreRefuses: the launcher's store holds the token; one rank has a wrong token
// or none. That rank's Init must fail with ErrAuth, the store must log the refusal, the
// others must fail at Init (not hang) naming the rank that never joined, and the token
// must not appear anywhere.
func TestAuthStoreRefuses(t *testing.T) {
	const bad = 2
	for _, c := range []struct{ name, tok string }{{"wrong", "not-the-token"}, {"none", ""}} {
		t.Run(c.name, func(t *testing.T) {
			res := job{n: 3, env: []string{"GOCCL_TRANSPORT=tcp", "GOCCL_AUTH_TOKEN=" + token, "GOCCL_INIT_TIMEOUT=5s",
				"E2E_TOKEN_RANK=2", "E2E_TOKEN=" + c.tok}, args: []string{"-mode", "auth"}, timeout: time.Minute}.run(t)
			outs := records(res.stdout, "AUTH")
			require.Len(t, outs, 3, "%s", res)
			require.Equal(t, "true", outs[bad].kv["auth"], "rank %d must be refused with ErrAuth: %s", bad, outs[bad].line)
			for r, o := range outs {
				if r == bad {
					continue
				}
				require.NotEmpty(t, o.kv["err"], "rank %d initialised without rank %d", r, bad)
				require.True(t, namesRank(o.kv["err"], bad), "rank %d's error does not name rank %d: %s", r, bad, o.kv["err"])
			}
			require.Contains(t, res.stderr, "auth", "the store did not log the refusal\n%s", res)
			requireNoToken(t, res)
		})
	}
}

// TestAuthLinksRefuse: the store is a FileStore (no authentication of its own), so the
// tcp links' handshake alone must keep out the rank with the wrong token or none: its
// Init and its would-be peers' Init fail, with ErrAuth on both sides of the refused link.
func TestAuthLinksRefuse(t *testing.T) {
	const bad = 2
	for _, c := range []struct{ name, tok string }{{"wrong", "not-the-token"}, {"none", ""}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			res := job{n: 3, env: []string{"GOCCL_TRANSPORT=tcp", "GOCCL_AUTH_TOKEN=" + token, "GOCCL_INIT_TIMEOUT=10s",
				"E2E_STORE=file:" + dir, "E2E_TOKEN_RANK=2", "E2E_TOKEN=" + c.tok, "GOCCL_DEBUG=INFO"},
				args: []string{"-mode", "auth"}, timeout: time.Minute}.run(t)
			outs := records(res.stdout, "AUTH")
			require.Len(t, outs, 3, "%s", res)
			require.Equal(t, "true", outs[bad].kv["auth"], "rank %d must be refused with ErrAuth: %s", bad, outs[bad].line)
			authSeen := 0
			for r, o := range outs {
				require.NotEmpty(t, o.kv["err"], "rank %d initialised with a rank whose token is wrong\n%s", r, res)
				if o.kv["auth"] == "true" {
					authSeen++
				}
			}
			// Rank 2 dials nobody (the lower rank dials), ranks 0 and 1 dial it: their
			// handshakes are the refused ones, so they see ErrAuth too.
			require.Equal(t, 3, authSeen, "every rank should see ErrAuth on the refused links\n%s", res)
			require.True(t, strings.Contains(res.stderr, "auth") || strings.Contains(res.stdout, "auth"))
			requireNoToken(t, res)
		})
	}
}
