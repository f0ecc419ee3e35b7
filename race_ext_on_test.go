//go:build race

package goccl_test

const raceEnabledExt = true // see race_on_test.go
