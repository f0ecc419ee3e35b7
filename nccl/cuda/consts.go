package cuda

// MemcpyKind is cudaMemcpyKind.
type MemcpyKind int

// Copy directions (cudaMemcpyHostToHost = 0 ... cudaMemcpyDefault = 4).
const (
	HostToHost     MemcpyKind = 0
	HostToDevice   MemcpyKind = 1
	DeviceToHost   MemcpyKind = 2
	DeviceToDevice MemcpyKind = 3
	DefaultKind    MemcpyKind = 4 // direction inferred from unified addresses
)

// MemoryType is cudaMemoryType, as cudaPointerGetAttributes reports it.
type MemoryType int

// Memory types. Since CUDA 11 an ordinary (pageable, Go) host pointer is Unregistered.
const (
	Unregistered MemoryType = 0
	HostMemory   MemoryType = 1 // pinned or registered host memory
	DeviceMemory MemoryType = 2
	Managed      MemoryType = 3
)

func (m MemoryType) String() string {
	switch m {
	case Unregistered:
		return "unregistered host"
	case HostMemory:
		return "pinned host"
	case DeviceMemory:
		return "device"
	case Managed:
		return "managed"
	}
	return "unknown"
}

// Attr is a cudaDeviceAttr (the same numbers as the driver's CU_DEVICE_ATTRIBUTE_*).
type Attr int

// Device attributes goccl reads.
const (
	AttrMaxThreadsPerBlock  Attr = 1
	AttrMultiProcessorCount Attr = 16
	AttrComputeCapMajor     Attr = 75
	AttrComputeCapMinor     Attr = 76
)

// Flags passed through to the runtime.
const (
	streamNonBlocking  = 0x01 // cudaStreamNonBlocking: no implicit sync with the legacy stream
	eventDisableTiming = 0x02 // cudaEventDisableTiming
	hostAllocPortable  = 0x01 // cudaHostAllocPortable: pinned for every device
	setDevFailed       = 0x40000000
)

// sonames in preference order; wheels ship only the versioned file.
var (
	sonames   = []string{"libcudart.so.13", "libcudart.so.12", "libcudart.so"}
	wheelDirs = []string{"nvidia/cu13/lib", "nvidia/cuda_runtime/lib"}
	extraDirs = []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"}
)
