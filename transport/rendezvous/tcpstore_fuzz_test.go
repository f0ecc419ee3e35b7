package rendezvous

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzStoreRequest feeds arbitrary bytes to the server's request decoder: no panic, no
// allocation beyond the declared (bounded) sizes, and what it accepts re-encodes to
// exactly the bytes it consumed.
func FuzzStoreRequest(f *testing.F) {
	f.Add((&request{op: opSet, key: "k", value: []byte("v")}).encode())
	f.Add((&request{op: opGet, key: "key", value: make([]byte, 8)}).encode())
	f.Add([]byte{protoVersion, opAdd, 1, 0, 8, 0, 0, 0, 'k'})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		req, err := readRequest(r)
		if err != nil {
			return
		}
		consumed := len(data) - r.Len()
		require.Equal(t, data[:consumed], req.encode())
		require.LessOrEqual(t, len(req.key), MaxKey)
		require.LessOrEqual(t, len(req.value), MaxValue)
	})
}

// FuzzStoreResponse does the same for the client's response decoder.
func FuzzStoreResponse(f *testing.F) {
	f.Add(encodeResponse(stOK, []byte("value")))
	f.Add(encodeResponse(stTimeout, []byte("key \"x\" not set")))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, p, err := readResponse(bytes.NewReader(data), 1<<10)
		if err != nil {
			return
		}
		require.Equal(t, data[:respHeader+len(p)], encodeResponse(st, p))
	})
}

// FuzzStoreGreeting checks the greeting parser on arbitrary fixed-size input.
func FuzzStoreGreeting(f *testing.F) {
	f.Add(greeting(flagAuth, make([]byte, nonceLen)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < greetLen {
			return
		}
		flags, nonce, err := parseGreeting(data[:greetLen])
		if err != nil {
			return
		}
		require.Equal(t, data[:greetLen], greeting(flags, nonce))
	})
}
