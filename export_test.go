package goccl_test

import "github.com/goccl/goccl/transport/rendezvous"

func newMemStore() *rendezvous.MemStore { return rendezvous.NewMemStore() }
