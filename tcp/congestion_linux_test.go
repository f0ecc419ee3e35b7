package tcp

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goccl/goccl/transport"
	"github.com/goccl/goccl/transport/transporttest"
)

func congestionOf(t *testing.T, c net.Conn) string {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var name string
	var serr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		name, serr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}))
	require.NoError(t, serr)
	return name
}

// TestCongestion checks the congestion control every socket of a link gets: auto picks
// cubic or reno over loopback, an explicit allowed name is applied, and a name the
// kernel refuses fails Open with ErrInvalid and the names it would allow.
func TestCongestion(t *testing.T) {
	mesh := func(t *testing.T, cc string) ([][]transport.Conn, error) {
		p := transport.Params{ParamAddr: "127.0.0.1:0", ParamSockets: "2"}
		if cc != "" {
			p[ParamCongestion] = cc
		}
		eps, infos := transporttest.Open(t, Transport{}, 2, transporttest.Options{Params: p})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conns, err := transporttest.Connect(ctx, eps, infos, 5*time.Second)
		if err == nil {
			t.Cleanup(func() {
				for _, row := range conns {
					for _, c := range row {
						if c != nil {
							_ = c.Close()
						}
					}
				}
			})
		}
		return conns, err
	}
	for _, tc := range []struct {
		cc   string
		want []string
	}{
		{"", autoCongestion},
		{CongestionAuto, autoCongestion},
		{"reno", []string{"reno"}},
	} {
		t.Run(fmt.Sprintf("%q", tc.cc), func(t *testing.T) {
			conns, err := mesh(t, tc.cc)
			require.NoError(t, err)
			for _, d := range [][2]int{{0, 1}, {1, 0}} {
				for i, s := range conns[d[0]][d[1]].(*conn).socks {
					require.Contains(t, tc.want, congestionOf(t, s), "rank %d socket %d", d[0], i)
				}
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		_, err := Transport{}.Open(context.Background(), transport.Local{CommID: "cc", Rank: 0, World: 2, Host: "localhost",
			Params: transport.Params{ParamAddr: "127.0.0.1:0", ParamCongestion: "nosuchcc"}})
		require.ErrorIs(t, err, transport.ErrInvalid)
		require.Contains(t, err.Error(), "nosuchcc")
		require.Contains(t, err.Error(), "reno", "the error lists what the kernel allows")
	})
}
