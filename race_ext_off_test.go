//go:build !race

package goccl_test

const raceEnabledExt = false
