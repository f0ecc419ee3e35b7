package verbs

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl/rdma/internal/rc"
	"github.com/goccl/goccl/transport"
)

func TestLoadMissingLibraryNamesWhatWasSearched(t *testing.T) {
	err := loadFrom([]string{"libgoccl-no-such-verbs.so.1", "libgoccl-no-such-verbs.so"})
	require.ErrorIs(t, err, transport.ErrNotSupported)
	require.Contains(t, err.Error(), "libgoccl-no-such-verbs.so.1, libgoccl-no-such-verbs.so")
}

// libraryPresent reports whether libibverbs loads here; tests that need it skip with
// the loader's reason otherwise.
func libraryPresent(t *testing.T) {
	t.Helper()
	if _, err := StatusString(0); err != nil {
		require.ErrorIs(t, err, transport.ErrNotSupported)
		t.Skipf("libibverbs not loadable here: %v", err)
	}
}

// TestStatusNamesMatchLibrary compares rc.Status's names with libibverbs' own
// ibv_wc_status_str, through the real loader and trampolines.
func TestStatusNamesMatchLibrary(t *testing.T) {
	libraryPresent(t)
	for s := 0; s < 24; s++ {
		want, err := StatusString(s)
		require.NoError(t, err)
		require.Equal(t, want+" ("+itoa(s)+")", rc.Status(s).String(), "status %d", s)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestOpenWithoutDevice: where the library loads but the host has no RDMA device (this
// machine: ibv_get_device_list fails with ENOSYS), Open says so with ErrNotSupported.
// Where a device exists, Open must succeed and report an active port.
func TestOpenWithoutDevice(t *testing.T) {
	libraryPresent(t)
	d, err := Open(Selector{GIDIndex: -1})
	if _, statErr := os.Stat("/sys/class/infiniband"); statErr == nil && err == nil {
		defer d.Close()
		require.NotEmpty(t, d.Port().Device)
		return
	}
	require.Error(t, err)
	require.ErrorIs(t, err, transport.ErrNotSupported)
	if runtime.GOOS == "linux" {
		if _, statErr := os.Stat("/sys/class/infiniband"); errors.Is(statErr, os.ErrNotExist) {
			require.Contains(t, err.Error(), "ibv_get_device_list")
		}
	}
	require.ErrorIs(t, Probe(), transport.ErrNotSupported)
}

// TestOpenExcludedEverything: an HCA filter that matches nothing is ErrNotSupported
// whatever the host has.
func TestOpenExcludedEverything(t *testing.T) {
	libraryPresent(t)
	_, err := Open(Selector{Match: func(string, int) bool { return false }, GIDIndex: -1})
	require.ErrorIs(t, err, transport.ErrNotSupported)
}
