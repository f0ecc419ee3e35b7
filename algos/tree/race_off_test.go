//go:build !race

package tree

const raceBuild = false
