// Package transporttest is the conformance suite every goccl transport runs, in the
// spirit of net/nettest and testing/fstest: one call checks that a transport keeps the
// promises of the transport.Conn contract, so shm, rdma and nccl are held to the same
// behaviour as tcp and inmem.
//
// Run opens W endpoints in the calling process (ranks as goroutines, a MemStore for
// rendezvous), connects every pair concurrently and checks message ordering, sizes from
// 0 to 64 MiB with content checks, every pair at once, full-duplex traffic, header and
// length mismatches, close and cancel semantics, the optional Streamer and
// ColdReceiver abilities, CanConnect symmetry and rejection of bad arguments:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, tcp.Transport{}, transporttest.Options{
//			Params: transport.Params{"tcp.addr": "127.0.0.1:0"},
//		})
//	}
//
// Mesh and Open are exported so that other packages' tests (algorithms, the
// communicator) can build a fully connected set of links over any transport in a few
// lines. Links and endpoints they return are closed by t.Cleanup.
package transporttest
