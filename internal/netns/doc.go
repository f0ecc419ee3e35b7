// Package netns builds several "hosts" on one Linux machine for tests and benchmarks:
// each host is a network namespace with its own loopback and one Ethernet interface,
// and every host's interface is cabled (a veth pair) to a bridge in a private hub
// namespace, like machines on one switch. Processes started in a host namespace see
// only that host's interfaces, so goccl ranks with different GOCCL_HOST_ID values talk
// tcp across the bridge while ranks of one host still share memory (namespaces split
// the network, not /dev/shm).
//
// Addresses are 10.200.0.<i+1>/24 on host i, with no default route: nothing sent from a
// host can leave the hub. Cut unplugs a host's cable (the hub side goes down), Restore
// plugs it back, and Close deletes every namespace (and with them the veths and the
// bridge). Namespace names carry the creating process's id, so New also removes what an
// earlier, killed test process left behind.
//
// Creating namespaces needs root (CAP_SYS_ADMIN) and iproute2's ip; Available says why
// not with an error wrapping transport.ErrNotSupported, and ForTest skips a test with
// that reason.
//
//	n := netns.ForTest(t, 2)            // two hosts, torn down when the test ends
//	cmd := n.Command(ctx, 1, "./rank")  // runs in host 1 (ip netns exec)
//	n.Cut(ctx, 1)                       // host 1 drops off the network
package netns
