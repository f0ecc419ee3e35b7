//go:build linux && cgo

package nccl

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/transport"
)

func TestGPUsWithoutDriver(t *testing.T) {
	gpus, err := GPUs()
	if err == nil {
		t.Skipf("an NVIDIA driver is present (%d GPUs)", len(gpus))
	}
	require.ErrorIs(t, err, transport.ErrNotSupported)
	require.Contains(t, err.Error(), "no NVIDIA driver")
}

// TestDiscoverH200 runs discovery against go-nvml's mock DGX H200.
func TestDiscoverH200(t *testing.T) {
	s := dgxh200.New()
	for _, d := range s.Devices {
		md := d.(*server.Device)
		md.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
			if link >= 18 {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		md.GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED }
	}
	gpus, drv, cu, err := discover(s)
	require.NoError(t, err)
	require.Equal(t, "550.54.15", drv)
	require.Equal(t, 12040, cu)
	require.Len(t, gpus, 8)
	for i, g := range gpus {
		require.Equal(t, i, g.Index)
		require.Contains(t, g.Name, "H200")
		require.Equal(t, 18, g.ActiveNVLinks())
		require.Equal(t, 9, g.ComputeMajor)
		require.NotZero(t, g.MemoryTotal)
		require.Equal(t, FormatDevice(g.Domain, g.Bus, g.Device, g.Name), g.DeviceString())
		d, b, dv, err := ParseBusID(g.PCIBusID)
		require.NoError(t, err, g.PCIBusID)
		require.Equal(t, []uint32{g.Domain, g.Bus, g.Device}, []uint32{d, b, dv})
	}
}
