package perf

import (
	"context"
	"fmt"

	"github.com/goccl/goccl/transport"
)

// hostViews returns host memory for the send and receive buffers of a data check:
// the buffers themselves for host memory, a staging copy for device memory.
func (b *bench) hostViews(_ context.Context, s, r transport.Buffer, k Counts, es int64) (send, recv []byte, err error) {
	if !b.device {
		return s.Bytes(), r.Bytes(), nil
	}
	need := int((k.Send + k.Recv) * es)
	if cap(b.stageBuf) < need {
		b.stageBuf = make([]byte, need)
	}
	buf := b.stageBuf[:need]
	return buf[:k.Send*es], buf[k.Send*es:], nil
}

// stageIn copies a check's input to device memory: the zeroed receive buffer first,
// then the input (in place, the input lands inside the receive buffer).
func (b *bench) stageIn(ctx context.Context, s, r transport.Buffer, send, recv []byte, chk *Check, inPlace bool) error {
	st, err := transport.DeviceStager()
	if err != nil {
		return err
	}
	if err := st.FromHost(ctx, r, recv); err != nil {
		return fmt.Errorf("perf: staging the receive buffer: %w", err)
	}
	if inPlace {
		chk.Fill(send)
	}
	if err := st.FromHost(ctx, s, send); err != nil {
		return fmt.Errorf("perf: staging the input: %w", err)
	}
	return nil
}

func (b *bench) stageOut(ctx context.Context, r transport.Buffer, recv []byte) error {
	st, err := transport.DeviceStager()
	if err != nil {
		return err
	}
	if err := st.ToHost(ctx, recv, r); err != nil {
		return fmt.Errorf("perf: reading the result back: %w", err)
	}
	return nil
}
