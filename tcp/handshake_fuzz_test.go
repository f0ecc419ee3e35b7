package tcp

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// rw feeds a fixed input to the handshake and discards its replies.
type rw struct{ io.Reader }

func (rw) Write(p []byte) (int, error) { return len(p), nil }

// countingReader records how much the handshake read, to show it stays bounded.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzHandshake feeds arbitrary bytes to the listener's side of the handshake, with and
// without a token. It must never panic, never read past three bounded messages, and
// accept only input that decodes to a hello passing validation.
func FuzzHandshake(f *testing.F) {
	var good bytes.Buffer
	_ = writeMsg(&good, msgInit, (&initMsg{Version: hsVersion}).encode())
	h := hello{Comm: "fuzz", From: 0, To: 1, World: 2, Index: 0, Count: 2, StripeMin: 1 << 18}
	_ = writeMsg(&good, msgHello, h.encode())
	f.Add(good.Bytes())
	f.Add([]byte{msgInit, 0, 0})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	validate := func(h hello) *refusedError {
		if h.Comm != "fuzz" || h.To != 1 || h.World != 2 || h.From != 0 || h.Count == 0 || h.Index >= h.Count {
			return &refusedError{code: rejectPeer, reason: "no"}
		}
		return nil
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, token := range [][]byte{nil, []byte("tok")} {
			cr := &countingReader{r: bytes.NewReader(data)}
			got, err := listenHandshake(rw{cr}, token, validate)
			require.LessOrEqual(t, cr.n, 3*(3+maxBody))
			if err != nil {
				continue
			}
			require.Empty(t, token, "an unauthenticated input passed with a token set")
			require.Nil(t, validate(got))
		}
	})
}

// FuzzDecodeHello checks the hello decoder on arbitrary bodies: no panic, and whatever
// it accepts encodes back to the same bytes.
func FuzzDecodeHello(f *testing.F) {
	f.Add((&hello{Comm: "c", From: 1, To: 2, World: 3, Index: 0, Count: 1, StripeMin: 4096}).encode())
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHello(b)
		if err != nil {
			return
		}
		require.Equal(t, b, h.encode())
	})
}
