// Package relstore has the store sync/atomic lacks: a store with release ordering
// only, for a word that other goroutines (or processes, through shared memory) read
// with sync/atomic's loads, written where a full fence would cost more than it buys.
// A reader that loads the word and sees the stored value sees everything the writer
// stored before it. Nothing orders the store before a later load (no Dekker
// hand-shakes: use sync/atomic for those).
package relstore

import "unsafe"

// Int32 is Uint32 for an int32.
func Int32(addr *int32, v int32) { Uint32((*uint32)(unsafe.Pointer(addr)), uint32(v)) }

// Int64 is Uint64 for an int64.
func Int64(addr *int64, v int64) { Uint64((*uint64)(unsafe.Pointer(addr)), uint64(v)) }
