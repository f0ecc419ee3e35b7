package transport_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

// plain is a transport that does not check its Params: it owns "<name>." all the same.
type plain struct{ name string }

func (p plain) Name() string { return p.name }
func (plain) Open(context.Context, transport.Local) (transport.Endpoint, error) {
	return nil, transport.ErrNotSupported
}

// checked owns two prefixes and knows one key, "pc.size", which must be "1" or "2".
type checked struct{ plain }

func (checked) ParamPrefixes() []string { return []string{"pc.", "pclib."} }
func (checked) CheckParams(p transport.Params) error {
	if k := transport.UnknownParam(p, "pc.", []string{"pc.size"}); k != "" {
		return fmt.Errorf("%w: unknown parameter %q", transport.ErrInvalid, k)
	}
	if v, ok := p["pc.size"]; ok && v != "1" && v != "2" {
		return fmt.Errorf("%w: pc.size=%q", transport.ErrInvalid, v)
	}
	return nil
}

func TestCheckParams(t *testing.T) {
	transport.Register(plain{"pplain"})
	transport.Register(checked{plain{"pchecked"}})
	for _, tc := range []struct {
		p    transport.Params
		want string // "" = accepted
	}{
		{nil, ""},
		{transport.Params{"local_rank": "x", "pplain.anything": "goes", "pc.size": "2", "pclib.path": "/x"}, ""},
		{transport.Params{"pc.size": "3"}, `pc.size="3"`},
		{transport.Params{"pc.sise": "1"}, `unknown parameter "pc.sise"`},
		// pchecked owns "pc." and "pclib." but not its own name's prefix.
		{transport.Params{"pchecked.size": "1"}, `no transport reads "pchecked." keys`},
		{transport.Params{"zz.b": "1", "pc.size": "1"}, `parameter "zz.b": no transport reads "zz." keys (valid prefixes: `},
		{transport.Params{".x": "1"}, `parameter ".x": no transport reads "." keys`},
	} {
		err := transport.CheckParams(tc.p)
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.p)
			continue
		}
		require.True(t, errors.Is(err, transport.ErrInvalid), "%v: %v", tc.p, err)
		require.ErrorContains(t, err, tc.want)
	}
	err := transport.CheckParams(transport.Params{"zz.b": "1"})
	require.ErrorContains(t, err, "pc., pclib.")
	require.ErrorContains(t, err, "pplain.")
	require.NotContains(t, err.Error(), "pchecked.")
}

func TestUnknownParam(t *testing.T) {
	p := transport.Params{"a.x": "1", "a.b": "2", "b.q": "3", "a.y": "4"}
	require.Equal(t, "a.b", transport.UnknownParam(p, "a.", []string{"a.x"}), "the first unknown key in sorted order")
	require.Equal(t, "", transport.UnknownParam(p, "a.", []string{"a.x", "a.b", "a.y"}))
	require.Equal(t, "b.q", transport.UnknownParam(p, "b.", nil))
	require.Equal(t, "", transport.UnknownParam(p, "c.", nil))
}
