// Package rendezvous is how the ranks of a job find each other before any link exists:
// a small key-value Store (Set, Get that waits, Add, Delete) and the discovery of the
// launcher's environment.
//
// Stores: MemStore for goroutine ranks in one process; TCPStore, a client of a
// TCPStoreServer that rank 0 (ServeOrDial, like torchrun's MASTER_ADDR:MASTER_PORT),
// `goccl run` or `goccl store --listen` serves; FileStore, a directory on a shared file
// system; and Prefix, which scopes any of them to one communicator. The TCPStore protocol
// is binary and length-prefixed with bounded keys (MaxKey) and values (MaxValue); with
// an auth token both sides prove they hold it (HMAC-SHA256 over fresh nonces) before
// any request, and a client that sends garbage loses only its own connection.
//
// DiscoverEnv reads GOCCL_*, torchrun, Open MPI, Slurm and PMI variables, in that
// precedence, and the store address from GOCCL_STORE or MASTER_ADDR:MASTER_PORT:
//
//	l, err := rendezvous.DiscoverEnv(os.Getenv)
//	store, err := rendezvous.ServeOrDial(ctx, l.StoreAddr, l.Rank == 0, rendezvous.ClientOptions{})
//	defer store.Close()
//	err = store.Set(ctx, fmt.Sprintf("addr/%d", l.Rank), myAddr)
//	peer, err := store.Get(ctx, "addr/0") // waits until rank 0 has set it
//
// Every call that waits takes a context and honours it; a store that cannot be reached
// is an error after ClientOptions.Timeout, not a hang.
package rendezvous
