// Package streamcopy copies with non-temporal stores: the copied lines go to memory
// instead of staying dirty in this core's cache. That is faster when another core
// reads them next (it then reads them from memory rather than from this core's cache
// line by line), and when nobody reads them soon (the copy skips reading each line
// before writing it), and slower when this core reads them next.
//
// On amd64 with AVX, Copy streams the 128-byte blocks of a copy of at least 4 KiB
// from the destination's first 32-byte boundary, and copies the bytes before and
// after them with the built-in copy; elsewhere it is the built-in copy.
package streamcopy
