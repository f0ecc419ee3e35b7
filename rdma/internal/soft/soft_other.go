//go:build !linux

package soft

import (
	"fmt"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

// DeviceName is the one device this provider offers.
const DeviceName = "soft0"

// Open fails: the software provider needs Linux memfd, pidfd and futex.
func Open() (rc.Device, error) {
	return nil, fmt.Errorf("soft: %w: the software RDMA provider needs Linux", transport.ErrNotSupported)
}
