//go:build !linux

package launch

import "syscall"

// sysProcAttr puts each rank in its own process group (no parent-death signal here).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
