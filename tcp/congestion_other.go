//go:build !linux

package tcp

import (
	"fmt"

	"github.com/goccl/goccl/transport"
)

// setCongestionFD: choosing a congestion control per socket is Linux's; elsewhere
// tcp.congestion=auto keeps the system's and an explicit name is refused.
func setCongestionFD(uintptr, string) error {
	return fmt.Errorf("tcp: %w: TCP_CONGESTION outside Linux", transport.ErrNotSupported)
}
