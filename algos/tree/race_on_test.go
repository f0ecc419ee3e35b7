//go:build race

package tree

// raceBuild: under -race sync.Pool drops what it is given at random, so a warm pool
// cannot be counted on.
const raceBuild = true
