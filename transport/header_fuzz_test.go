package transport

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzFrameDecode feeds arbitrary bytes to Frame.Decode: it must never panic, and any
// header it accepts must be in range and encode back to the same bytes.
func FuzzFrameDecode(f *testing.F) {
	var b [FrameHeaderSize]byte
	fr := Frame{Header: Header{Seq: 7, Fp: Fingerprint{Kind: KindAllReduce, DType: Float32, Op: Sum, Count: 1 << 20, Root: -1}, Tag: 3}, Len: 4 << 20}
	fr.Encode(b[:])
	f.Add(b[:])
	f.Add(b[:FrameHeaderSize-1])
	f.Add(make([]byte, FrameHeaderSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr Frame
		if err := fr.Decode(data); err != nil {
			require.ErrorIs(t, err, ErrProtocol)
			return
		}
		require.True(t, fr.Fp.Kind.Valid() && fr.Fp.DType.Valid() && fr.Fp.Op.Valid())
		require.LessOrEqual(t, fr.Len, uint64(MaxFrameLen))
		var out [FrameHeaderSize]byte
		fr.Encode(out[:])
		require.Equal(t, data[:FrameHeaderSize], out[:])
	})
}
