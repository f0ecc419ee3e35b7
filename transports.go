package goccl

// The built-in transports register themselves, so every configured name works.
import (
	_ "github.com/goccl/goccl/nccl"
	_ "github.com/goccl/goccl/rdma"
	_ "github.com/goccl/goccl/shm"
	_ "github.com/goccl/goccl/tcp"
)
